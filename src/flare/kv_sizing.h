// How many KV tokens `flare run` allocates (spec cli-design, "Memory follows the model and the
// host"): the memory budget (CPU: half of available host memory by default; GPU: the free memory
// less the serving reserve, which an explicit [memory] reserve replaces), or the runtime
// --memory-limit (an occupied size, a free-memory reserve or a fraction of total memory), which
// replaces either default; minus what the model holds and the engine's headroom; bounded by the
// --kv-cache-limit ceiling. A pool below its floor (8,192 tokens per request slot, or one page per
// slot under a --kv-cache-limit bound) is a capacity error in the spec's section 6 form.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace flare::cli {

// Where the pages will live. On the CPU, the model's fixed bytes are charged against the budget; on
// a GPU the weights are already resident, so `available` is what is free now and `held` what the
// model holds (counted in occupied and fractional limits).
struct KvMemory {
  bool gpu = false;
  std::uint64_t available = 0;
  std::uint64_t total = 0;
  std::uint64_t held = 0;
  std::uint64_t headroom = 0;
  std::optional<std::uint64_t> package_reserve;  // GPU: the package's serving reserve
};

struct KvRequest {
  std::optional<std::string> memory_limit;        // --memory-limit
  std::string kv_cache_limit = "memory";          // memory | context | concurrency
  std::optional<std::uint64_t> configured_reserve;  // [memory] reserve
};

struct KvSizing {
  std::int64_t n_pages = 0;
  std::int64_t tokens = 0;
  std::string limited_by;
};

inline constexpr std::int64_t kMinTokensPerRequest = 8192;

KvMemory host_kv_memory(std::uint64_t headroom);

// `fixed_bytes`: the model's weights and scratch (charged on the CPU; on a GPU `memory.held` is).
KvSizing size_kv_cache(const KvRequest& request, const KvMemory& memory, std::uint64_t fixed_bytes,
                       std::uint64_t bytes_per_token, std::int64_t context, std::int64_t concurrency,
                       std::int64_t page_tokens);

}  // namespace flare::cli
