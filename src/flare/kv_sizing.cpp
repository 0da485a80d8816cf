#include "flare/kv_sizing.h"

#include <algorithm>
#include <vector>

#include "common/capacity.h"
#include "common/host_memory.h"
#include "common/sizes.h"

namespace flare::cli {

KvMemory host_kv_memory(std::uint64_t headroom) {
  return {false, host_memory_bytes("MemAvailable"), host_memory_bytes("MemTotal"), 0, headroom, std::nullopt};
}

KvSizing size_kv_cache(const KvRequest& options, const KvMemory& memory, std::uint64_t fixed_bytes,
                       std::uint64_t bytes_per_token, std::int64_t context, std::int64_t concurrency,
                       std::int64_t page_tokens) {
  const std::uint64_t available = memory.gpu ? memory.available + memory.held : memory.available;
  const std::uint64_t total = memory.total;
  const std::uint64_t headroom = memory.headroom;
  if (memory.gpu) fixed_bytes = memory.held;
  std::uint64_t budget = memory.gpu ? available : available / 2;
  std::string budget_source = memory.gpu ? "free GPU memory" : "half of available host memory";
  CapacityTerm supply_term{available, "available", ""};
  std::vector<CapacityTerm> deductions{{headroom, "headroom", ""}};
  if (memory.gpu && !options.memory_limit) {
    const std::uint64_t reserve = options.configured_reserve.value_or(memory.package_reserve.value_or(0));
    if (reserve > 0) {
      budget = available > reserve ? available - reserve : 0;
      budget_source = options.configured_reserve ? "[memory] reserve" : "the package's serving reserve";
      deductions.push_back({reserve, "reserve", ""});
    }
  }
  if (options.memory_limit) {
    const MemoryLimit limit = parse_memory_limit(*options.memory_limit);
    switch (limit.kind) {
      case MemoryLimit::Kind::occupied_bytes:
        budget = limit.bytes;
        budget_source = "--memory-limit " + *options.memory_limit;
        supply_term = {limit.bytes, "memory limit", ""};
        deductions.clear();
        break;
      case MemoryLimit::Kind::reserve_bytes:
        budget = available > limit.bytes ? available - limit.bytes : 0;
        budget_source = "--memory-limit " + *options.memory_limit;
        deductions.push_back({limit.bytes, "reserve", ""});
        break;
      case MemoryLimit::Kind::fraction_of_total:
        budget = static_cast<std::uint64_t>(limit.fraction * static_cast<double>(total));
        budget = std::min(budget, available);
        budget_source = "--memory-limit " + *options.memory_limit;
        supply_term = {budget, "limit", ""};
        deductions.clear();
        break;
    }
  } else if (options.configured_reserve && !memory.gpu) {
    budget = available > *options.configured_reserve ? available - *options.configured_reserve : 0;
    budget_source = "[memory] reserve";
    deductions.push_back({*options.configured_reserve, "reserve", ""});
  }
  const std::uint64_t after_fixed = budget > fixed_bytes + headroom ? budget - fixed_bytes - headroom : 0;
  std::int64_t tokens = static_cast<std::int64_t>(after_fixed / std::max<std::uint64_t>(bytes_per_token, 1));
  KvSizing sizing;
  sizing.limited_by = "memory (" + budget_source + ")";
  std::int64_t ceiling = 0, floor_tokens = 0;
  if (options.kv_cache_limit == "context") {
    ceiling = context;
    floor_tokens = page_tokens * concurrency;
  } else if (options.kv_cache_limit == "concurrency") {
    ceiling = context * concurrency;
    floor_tokens = page_tokens * concurrency;
  } else {
    // On the CPU, more than one context per slot holds no useful history; a GPU's pool fills the
    // budget (the prefix cache keeps what the active requests do not need).
    ceiling = memory.gpu ? std::int64_t(1) << 40 : context * concurrency;
    floor_tokens = std::min(kMinTokensPerRequest, context) * concurrency;
  }
  if (tokens > ceiling) {
    tokens = ceiling;
    sizing.limited_by = options.kv_cache_limit == "memory" ? "one context per request slot"
                                                           : "--kv-cache-limit " + options.kv_cache_limit;
  }
  if (tokens < floor_tokens) {
    CapacityShortfall shortfall;
    shortfall.needed = {{fixed_bytes, "weights and scratch", ""},
                        {static_cast<std::uint64_t>(floor_tokens) * bytes_per_token, "minimum pages",
                         fmt::format("{} \u00d7 {} tokens", concurrency,
                                     format_count(static_cast<std::uint64_t>(floor_tokens / std::max<std::int64_t>(concurrency, 1))))}};
    shortfall.available = supply_term;
    shortfall.deductions = deductions;
    shortfall.options = {"a lower --max-concurrency", "--kv-cache-limit context", "a larger --memory-limit"};
    fail_capacity(shortfall);
  }
  sizing.n_pages = (tokens + page_tokens - 1) / page_tokens;
  sizing.tokens = sizing.n_pages * page_tokens;
  return sizing;
}

}  // namespace flare::cli
