// KV pools per history group for `flare run` (see kv_groups.h).
#include "flare/kv_groups.h"

#include <fmt/format.h>

#include "common/sizes.h"
#include "helios/history.h"

namespace flare::cli {

WindowPools window_pools(const model::Model& model, std::int64_t concurrency, std::int64_t step_tokens,
                         std::int64_t page_tokens) {
  const std::vector<helios::HistoryGroup> groups = model.history_groups();
  WindowPools pools;
  const bool full_group = !groups.empty() && groups.front().window() == 0;
  pools.full_bytes_per_token = helios::history_token_bytes(model.history(), helios::DType::bf16);
  for (const helios::HistoryGroup& group : groups) {
    pools.windows.push_back(group.window());
    if (!full_group || group.window() == 0) {
      pools.pages.push_back(0);
      continue;
    }
    pools.pages.push_back(helios::history_window_pool_pages(group.window(), concurrency,
                                                            static_cast<std::int32_t>(step_tokens),
                                                            static_cast<std::int32_t>(page_tokens)));
  }
  pools.bytes = helios::history_window_pool_bytes(model.history(), concurrency, static_cast<std::int32_t>(step_tokens),
                                                  static_cast<std::int32_t>(page_tokens), helios::DType::bf16);
  return pools;
}

std::vector<engine::EngineOptions::KvGroup> kv_groups(const WindowPools& pools, std::int32_t n_pages) {
  std::vector<engine::EngineOptions::KvGroup> groups;
  for (std::size_t g = 0; g < pools.windows.size(); ++g) {
    groups.push_back({pools.pages[g] > 0 ? pools.pages[g] : n_pages, pools.windows[g]});
  }
  return groups;
}

std::string window_pools_text(const WindowPools& pools) {
  std::int64_t n = 0;
  for (const std::int32_t pages : pools.pages) n += pages;
  if (n == 0) return "";
  return fmt::format(", and {} pages for sliding-window layers ({})", format_count(static_cast<std::uint64_t>(n)),
                     format_bytes(pools.bytes));
}

}  // namespace flare::cli
