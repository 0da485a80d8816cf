// Memory planning before weights load (spec cli-design section 6, "Estimate roughly, allocate
// from the device"): the smallest configuration the engine accepts (weights, scratch, the prefix
// cache floor, and 8,192 tokens of KV pages per active request) against what the target has
// free, minus headroom and the configured reserve. A plan that does not fit is a capacity error
// listing options that each make it fit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/capacity.h"

namespace flare::ignition {

struct MemoryDemand {
  std::uint64_t weight_bytes = 0;
  std::uint64_t scratch_bytes = 0;          // activations and graphs
  std::uint64_t kv_bytes_per_token = 0;     // in the history groups sized by tokens
  std::uint64_t window_bytes = 0;           // sliding-window groups' pools (helios/history.h)
  std::int32_t max_concurrency = 1;
  std::int32_t min_tokens_per_request = 8192;
};

struct MemorySupply {
  std::uint64_t free_bytes = 0;
  std::uint64_t headroom_bytes = 0;
  std::uint64_t reserve_bytes = 0;
  std::string device;                       // "CPU memory", "GPU 0"
};

struct MemoryPlan {
  std::uint64_t needed_bytes = 0;
  std::uint64_t available_bytes = 0;
  std::uint64_t kv_budget_bytes = 0;        // what the pages may use
  std::int64_t kv_tokens = 0;               // pages' capacity in tokens at that budget
};

// Throws flare::Error (capacity) in the spec's form when the demand does not fit.
MemoryPlan plan_memory(const MemoryDemand& demand, const MemorySupply& supply);

}  // namespace flare::ignition
