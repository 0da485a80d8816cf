// Prefix cache: chained block hashes -> retained page forks, snapshots of partial pages (see prefix_cache.h).
#include "engine/prefix_cache.h"

#include <algorithm>
#include <limits>

#include "common/error.h"
#include "engine/hash_mix.h"

namespace flare::engine {
std::vector<std::uint64_t> prefix_block_hashes(std::span<const std::int32_t> tokens, std::int32_t block_tokens) {
  std::vector<std::uint64_t> hashes;
  if (block_tokens < 1) return hashes;
  const std::size_t n_blocks = tokens.size() / std::size_t(block_tokens);
  hashes.reserve(n_blocks);
  std::uint64_t chain = 0x6a09e667f3bcc908ull;
  for (std::size_t b = 0; b < n_blocks; ++b) {
    std::uint64_t h = hash_mix64(chain + b);  // FNV-1a over the block's tokens, seeded by the chain
    for (std::size_t i = 0; i < std::size_t(block_tokens); ++i) {
      h = (h ^ std::uint32_t(tokens[b * std::size_t(block_tokens) + i])) * 0x100000001b3ull;
    }
    chain = hash_mix64(h);
    hashes.push_back(chain);
  }
  return hashes;
}

PrefixCache::PrefixCache(helios::HistoryPools& pools, std::int32_t page_size_tokens, std::int32_t max_entries,
                         std::int32_t max_snapshots)
    : pools_(&pools), page_size_(page_size_tokens), max_entries_(max_entries), max_snapshots_(max_snapshots) {
  if (page_size_tokens < 1) fail_usage("prefix cache page size must be at least one token");
  if (max_entries < 0) fail_usage("prefix cache size must be >= 0, got {}", max_entries);
  if (max_snapshots < 0) fail_usage("prefix cache snapshot count must be >= 0, got {}", max_snapshots);
}

std::size_t PrefixCache::common_tokens(const Entry& entry, std::span<const std::int32_t> tokens,
                                       std::size_t n_whole) const {
  const std::size_t first = n_whole * std::size_t(page_size_);
  const std::size_t limit = std::min(tokens.size(), entry.tokens.size());
  if (limit <= first) return limit;
  const auto mismatch = std::mismatch(tokens.begin() + std::ptrdiff_t(first), tokens.begin() + std::ptrdiff_t(limit),
                                      entry.tokens.begin() + std::ptrdiff_t(first));
  return std::size_t(mismatch.first - tokens.begin());
}

helios::HistoryPages PrefixCache::lookup(std::span<const std::int32_t> tokens, std::int32_t max_tokens) {
  helios::HistoryPages out(*pools_, page_size_);
  if (max_tokens <= 0 || entries_.empty()) return out;
  const auto usable = tokens.first(std::min(tokens.size(), std::size_t(max_tokens)));
  const auto hashes = prefix_block_hashes(usable, page_size_);
  std::uint64_t best_id = 0;
  std::size_t best_tokens = 0;
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    auto it = index_.find(hashes[i]);
    if (it == index_.end() || it->second.empty()) break;
    for (std::uint64_t id : it->second) {
      const Entry& entry = entries_.at(id);
      // An entry that also holds the next whole block is weighed at that block.
      const bool goes_on = i + 1 < hashes.size() && entry.hashes.size() > i + 1 && entry.hashes[i + 1] == hashes[i + 1];
      if (goes_on) continue;
      // Past block i it may still share a partial page's worth of tokens with the prompt.
      const std::size_t n = common_tokens(entry, usable, i + 1);
      const bool better = n > best_tokens || (n == best_tokens && id > best_id);  // ties: the latest
      // A cut at n must hold the window its next query reads (held at n, held at every later cut).
      if (better && entry.pages.holds_window_at(std::int32_t(n))) {
        best_id = id;
        best_tokens = n;
      }
    }
  }
  if (best_tokens == 0) return out;
  Entry& entry = entries_.at(best_id);
  if (!std::equal(usable.begin(), usable.begin() + std::ptrdiff_t(best_tokens), entry.tokens.begin())) {
    return out;  // a 64-bit chain collision: treat as a miss
  }
  entry.last_use = ++clock_;
  out = entry.pages.fork();
  out.truncate(std::int32_t(best_tokens));
  return out;
}

void PrefixCache::insert(std::span<const std::int32_t> tokens, const helios::HistoryPages& pages) {
  if (max_entries_ == 0) return;
  std::size_t n_tokens = std::min(tokens.size(), std::size_t(pages.n_tokens()));
  const std::size_t n_whole = n_tokens / std::size_t(page_size_);
  if (n_whole == 0) return;
  if (max_snapshots_ == 0) n_tokens = n_whole * std::size_t(page_size_);
  const auto mine = tokens.first(n_tokens);
  if (!pages.holds_window_at(std::int32_t(n_tokens))) return;  // nothing could go on from it
  const auto hashes = prefix_block_hashes(mine, page_size_);
  // Already cached as (a prefix of) a checkpoint that can go on from here: refresh it.
  if (auto it = index_.find(hashes.back()); it != index_.end()) {
    for (std::uint64_t id : it->second) {
      Entry& entry = entries_.at(id);
      if (common_tokens(entry, mine, n_whole) == n_tokens && entry.pages.holds_window_at(std::int32_t(n_tokens))) {
        entry.last_use = ++clock_;
        return;
      }
    }
  }
  // Checkpoints that end inside this one are superseded where this one holds the same prefix
  // (and, with sliding windows, their windows too).
  std::vector<std::uint64_t> superseded;
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    auto it = index_.find(hashes[i]);
    if (it == index_.end()) continue;
    for (std::uint64_t id : it->second) {
      const Entry& entry = entries_.at(id);
      const std::size_t n = entry.tokens.size();
      if (entry.hashes.size() != i + 1 || n > n_tokens) continue;  // it ends past block i + 1 or past this one
      if (common_tokens(entry, mine, i + 1) == n && pages.holds_window_at(std::int32_t(n))) superseded.push_back(id);
    }
  }
  for (std::uint64_t id : superseded) erase(id);
  Entry entry{hashes, std::vector<std::int32_t>(mine.begin(), mine.end()), pages.fork(), ++clock_};
  entry.pages.truncate(std::int32_t(n_tokens));
  const bool snapshot = is_snapshot(entry);
  const std::uint64_t id = next_id_++;
  for (std::uint64_t h : entry.hashes) index_[h].push_back(id);
  entries_.emplace(id, std::move(entry));
  while (std::int32_t(entries_.size()) > max_entries_) erase(least_recent(false, 0));
  while (snapshot && n_snapshots() > max_snapshots_) cut_snapshot(least_recent_snapshot(false, 0));
}

void PrefixCache::cut_snapshot(std::uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || !is_snapshot(it->second)) return;
  Entry& entry = it->second;
  const std::size_t n_whole = entry.hashes.size() * std::size_t(page_size_);
  if (!entry.pages.holds_window_at(std::int32_t(n_whole))) {  // no whole-page cut can go on either
    erase(id);
    return;
  }
  entry.tokens.resize(n_whole);
  entry.pages.truncate(std::int32_t(n_whole));  // gives back the partial page
}

std::int32_t PrefixCache::n_snapshots() const {
  std::int32_t n = 0;
  for (const auto& [id, entry] : entries_) n += is_snapshot(entry) ? 1 : 0;
  return n;
}

bool PrefixCache::release_snapshots_of(std::int32_t group, std::int32_t page) {
  std::vector<std::uint64_t> holders;
  for (const auto& [id, entry] : entries_) {
    if (is_snapshot(entry) && entry.pages.group(group).pages().back() == page) holders.push_back(id);
  }
  for (std::uint64_t id : holders) cut_snapshot(id);
  return !holders.empty();
}

bool PrefixCache::snapshot_frees_page(const Entry& entry, std::int32_t group) const {
  if (!is_snapshot(entry)) return false;
  const std::int32_t page = entry.pages.group(group).pages().back();
  return page != helios::SequencePages::k_released && pools_->pool(group).ref_count(page) == 1;
}

std::uint64_t PrefixCache::least_recent_snapshot(bool only_freeing, std::int32_t group) const {
  std::uint64_t best = 0;
  std::uint64_t best_use = std::numeric_limits<std::uint64_t>::max();
  for (const auto& [id, entry] : entries_) {
    const bool eligible = only_freeing ? snapshot_frees_page(entry, group) : is_snapshot(entry);
    if (eligible && entry.last_use < best_use) {
      best = id;
      best_use = entry.last_use;
    }
  }
  return best;
}

bool PrefixCache::frees_pages(const Entry& entry, std::int32_t group) const {
  const helios::PagePool& pool = pools_->pool(group);
  for (std::int32_t page : entry.pages.group(group).pages()) {
    if (page != helios::SequencePages::k_released && pool.ref_count(page) == 1) return true;
  }
  return false;
}

std::uint64_t PrefixCache::least_recent(bool only_freeing, std::int32_t group) const {
  std::uint64_t best = 0;
  std::uint64_t best_use = std::numeric_limits<std::uint64_t>::max();
  for (const auto& [id, entry] : entries_) {
    if (entry.last_use < best_use && (!only_freeing || frees_pages(entry, group))) {
      best = id;
      best_use = entry.last_use;
    }
  }
  return best;
}

bool PrefixCache::evict_until_free(std::int32_t n_free_wanted, std::int32_t group) {
  // Snapshot pages only the cache holds go first: cutting one costs a later hit at most a page of
  // recomputation. Then checkpoints that free pages now (unpinned); then the rest, since dropping a
  // checkpoint that shares its pages with another can make that one freeing.
  const helios::PagePool& pool = pools_->pool(group);
  while (pool.n_free() < n_free_wanted) {
    const std::uint64_t id = least_recent_snapshot(true, group);
    if (id == 0) break;
    cut_snapshot(id);
  }
  while (pool.n_free() < n_free_wanted && !entries_.empty()) {
    std::uint64_t id = least_recent(true, group);
    if (id == 0) {
      if (n_pages_exclusive(group) == 0) break;  // live sequences pin every cached page: keep them
      id = least_recent(false, group);
    }
    erase(id);
  }
  return pool.n_free() >= n_free_wanted;
}

void PrefixCache::erase(std::uint64_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  for (std::uint64_t h : it->second.hashes) {
    auto found = index_.find(h);
    if (found == index_.end()) continue;
    auto& ids = found->second;
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
    if (ids.empty()) index_.erase(found);
  }
  entries_.erase(it);  // releases the entry's page references
}

void PrefixCache::clear() {
  entries_.clear();
  index_.clear();
}

std::int32_t PrefixCache::n_pages_exclusive(std::int32_t group) const {
  std::map<std::int32_t, std::int32_t> held;  // page -> references held by this cache
  for (const auto& [id, entry] : entries_) {
    for (std::int32_t page : entry.pages.group(group).pages()) {
      if (page != helios::SequencePages::k_released) ++held[page];
    }
  }
  const helios::PagePool& pool = pools_->pool(group);
  std::int32_t n = 0;
  for (const auto& [page, count] : held) n += pool.ref_count(page) == count ? 1 : 0;
  return n;
}

}  // namespace flare::engine
