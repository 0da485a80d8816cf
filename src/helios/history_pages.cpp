// Page pools per history group and a sequence's pages in each (see history_pages.h).
#include "helios/history_pages.h"

#include <algorithm>

#include "common/error.h"

namespace flare::helios {

HistoryPools::HistoryPools(const std::vector<Group>& groups) {
  if (groups.empty()) fail(ExitCode::failure, "internal: page pools for no history group");
  for (const Group& group : groups) {
    if (group.window_tokens < 0) fail(ExitCode::failure, "internal: a history window of {} tokens", group.window_tokens);
    pools_.push_back(std::make_unique<PagePool>(group.n_pages));
    windows_.push_back(group.window_tokens);
  }
}

HistoryPages::HistoryPages(HistoryPools& pools, std::int32_t page_size_tokens) : pools_(&pools) {
  groups_.reserve(std::size_t(pools.n_groups()));
  for (std::int32_t g = 0; g < pools.n_groups(); ++g) groups_.emplace_back(pools.pool(g), page_size_tokens);
}

void HistoryPages::append_table(std::int32_t g, std::vector<std::int32_t>& table) const {
  const std::int32_t released = pools_->released_page_id(g);
  for (const std::int32_t page : group(g).pages()) table.push_back(page == SequencePages::k_released ? released : page);
}

std::int32_t HistoryPages::n_held() const {
  std::int32_t n = 0;
  for (const SequencePages& pages : groups_) n += pages.n_held();
  return n;
}

std::int32_t HistoryPages::append(std::int32_t n, std::vector<PageCopy>& copies) {
  // Every group's pages first, so that a group short of pages leaves the others as they were.
  for (std::int32_t g = 0; g < n_groups(); ++g) {
    if (!pools_->pool(g).make_free(pages_to_append(g, n))) return g;
  }
  for (std::int32_t g = 0; g < n_groups(); ++g) {
    const std::size_t first_copy = copies.size();
    if (!groups_[std::size_t(g)].append(n, copies)) {
      fail(ExitCode::failure, "internal: history group {} lost the free pages it had", g);
    }
    for (std::size_t i = first_copy; i < copies.size(); ++i) copies[i].group = g;
  }
  return -1;
}

void HistoryPages::truncate(std::int32_t n_tokens) {
  for (SequencePages& pages : groups_) pages.truncate(n_tokens);
}

HistoryPages HistoryPages::fork() const {
  HistoryPages out(*pools_, groups_.front().page_size_tokens());
  for (std::size_t g = 0; g < groups_.size(); ++g) out.groups_[g] = groups_[g].fork();
  return out;
}

void HistoryPages::free() {
  for (SequencePages& pages : groups_) pages.free();
}

void HistoryPages::release_behind(std::int32_t first_query) {
  for (std::int32_t g = 0; g < n_groups(); ++g) {
    const std::int32_t window = pools_->window(g);
    if (window > 0) groups_[std::size_t(g)].release_before(first_query - window + 1);
  }
}

bool HistoryPages::holds_window_at(std::int32_t n_tokens) const {
  for (std::int32_t g = 0; g < n_groups(); ++g) {
    const std::int32_t window = pools_->window(g);
    if (window > 0 && !groups_[std::size_t(g)].holds_from(n_tokens - window + 1)) return false;
  }
  return true;
}

}  // namespace flare::helios
