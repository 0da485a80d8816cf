#include "ignition/memory_plan.h"

#include "common/sizes.h"

namespace flare::ignition {

MemoryPlan plan_memory(const MemoryDemand& demand, const MemorySupply& supply) {
  const std::uint64_t min_pages_bytes = static_cast<std::uint64_t>(demand.max_concurrency) *
                                        static_cast<std::uint64_t>(demand.min_tokens_per_request) *
                                        demand.kv_bytes_per_token;
  MemoryPlan plan;
  plan.needed_bytes = demand.weight_bytes + demand.scratch_bytes + demand.window_bytes + min_pages_bytes;
  const std::uint64_t deductions = supply.headroom_bytes + supply.reserve_bytes;
  plan.available_bytes = supply.free_bytes > deductions ? supply.free_bytes - deductions : 0;
  if (plan.needed_bytes > plan.available_bytes) {
    CapacityShortfall shortfall;
    shortfall.needed = {{demand.weight_bytes, "weights", ""},
                        {demand.scratch_bytes, "scratch", ""},
                        {min_pages_bytes, "minimum pages",
                         fmt::format("{} \u00d7 {} tokens", demand.max_concurrency,
                                     format_count(static_cast<std::uint64_t>(demand.min_tokens_per_request)))}};
    if (demand.window_bytes > 0) {
      shortfall.needed.insert(shortfall.needed.begin() + 2, {demand.window_bytes, "sliding-window pages", ""});
    }
    shortfall.available = {supply.free_bytes, "free", ""};
    shortfall.deductions = {{supply.headroom_bytes, "headroom", ""}};
    if (supply.reserve_bytes > 0) shortfall.deductions.push_back({supply.reserve_bytes, "reserve", ""});
    // Options that each make the plan fit on their own.
    // A smaller reserve fits when free memory minus headroom covers the need.
    if (supply.reserve_bytes > 0 && supply.free_bytes > supply.headroom_bytes + plan.needed_bytes) {
      const std::uint64_t largest_reserve = supply.free_bytes - supply.headroom_bytes - plan.needed_bytes;
      shortfall.options.push_back(fmt::format("[memory] reserve = \"{}G\"", largest_reserve / kGiB));
    }
    const std::uint64_t per_request = static_cast<std::uint64_t>(demand.min_tokens_per_request) * demand.kv_bytes_per_token;
    const std::uint64_t fixed = demand.weight_bytes + demand.scratch_bytes + demand.window_bytes;
    if (per_request > 0 && plan.available_bytes > fixed) {
      const std::uint64_t fitting = (plan.available_bytes - fixed) / per_request;
      if (fitting >= 1 && fitting < static_cast<std::uint64_t>(demand.max_concurrency))
        shortfall.options.push_back(fmt::format("--max-concurrency {}", fitting));
    }
    if (shortfall.options.empty()) shortfall.options.push_back("a device with more free memory");
    fail_capacity(shortfall);
  }
  plan.kv_budget_bytes = plan.available_bytes - demand.weight_bytes - demand.scratch_bytes - demand.window_bytes;
  plan.kv_tokens = demand.kv_bytes_per_token ? static_cast<std::int64_t>(plan.kv_budget_bytes / demand.kv_bytes_per_token) : 0;
  return plan;
}

}  // namespace flare::ignition
