// Prefix cache: chained block hashes -> retained page forks (see prefix_cache.h).
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

PrefixCache::PrefixCache(helios::HistoryPools& pools, std::int32_t page_size_tokens, std::int32_t max_entries)
    : pools_(&pools), page_size_(page_size_tokens), max_entries_(max_entries) {
  if (page_size_tokens < 1) fail_usage("prefix cache page size must be at least one token");
  if (max_entries < 0) fail_usage("prefix cache size must be >= 0, got {}", max_entries);
}

helios::HistoryPages PrefixCache::lookup(std::span<const std::int32_t> tokens, std::int32_t max_tokens) {
  helios::HistoryPages out(*pools_, page_size_);
  if (max_tokens <= 0 || entries_.empty()) return out;
  const std::size_t n_usable = std::min(tokens.size(), std::size_t(max_tokens));
  const auto hashes = prefix_block_hashes(tokens.first(n_usable), page_size_);
  std::uint64_t best_id = 0;
  std::size_t best_blocks = 0;
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    auto it = index_.find(hashes[i]);
    if (it == index_.end() || it->second.empty()) break;
    // The latest checkpoint through this block that can go on from its end (its windows held).
    const auto n_cut = std::int32_t((i + 1) * std::size_t(page_size_));
    for (auto id = it->second.rbegin(); id != it->second.rend(); ++id) {
      if (entries_.at(*id).pages.holds_window_at(n_cut)) {
        best_id = *id;
        best_blocks = i + 1;
        break;
      }
    }
  }
  if (best_blocks == 0) return out;
  Entry& entry = entries_.at(best_id);
  const std::size_t n_tokens = best_blocks * std::size_t(page_size_);
  if (!std::equal(tokens.begin(), tokens.begin() + std::ptrdiff_t(n_tokens), entry.tokens.begin())) {
    return out;  // a 64-bit chain collision: treat as a miss
  }
  entry.last_use = ++clock_;
  out = entry.pages.fork();
  out.truncate(std::int32_t(n_tokens));
  return out;
}

void PrefixCache::insert(std::span<const std::int32_t> tokens, const helios::HistoryPages& pages) {
  if (max_entries_ == 0) return;
  const std::size_t n_whole = std::min(tokens.size(), std::size_t(pages.n_tokens())) / std::size_t(page_size_);
  if (n_whole == 0) return;
  const std::size_t n_tokens = n_whole * std::size_t(page_size_);
  const auto hashes = prefix_block_hashes(tokens.first(n_tokens), page_size_);
  if (!pages.holds_window_at(std::int32_t(n_tokens))) return;  // nothing could go on from it
  // Already cached as (a prefix of) a checkpoint that can go on from here: refresh it.
  if (auto it = index_.find(hashes.back()); it != index_.end()) {
    for (std::uint64_t id : it->second) {
      Entry& entry = entries_.at(id);
      if (entry.pages.holds_window_at(std::int32_t(n_tokens))) {
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
      const bool ends_here = entries_.at(id).hashes.size() == i + 1;
      if (ends_here && pages.holds_window_at(std::int32_t((i + 1) * std::size_t(page_size_)))) superseded.push_back(id);
    }
  }
  for (std::uint64_t id : superseded) erase(id);
  Entry entry{hashes, std::vector<std::int32_t>(tokens.begin(), tokens.begin() + std::ptrdiff_t(n_tokens)),
              pages.fork(), ++clock_};
  entry.pages.truncate(std::int32_t(n_tokens));
  const std::uint64_t id = next_id_++;
  for (std::uint64_t h : entry.hashes) index_[h].push_back(id);
  entries_.emplace(id, std::move(entry));
  while (std::int32_t(entries_.size()) > max_entries_) erase(least_recent(false, 0));
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
  // Checkpoints that free pages now (unpinned) go first; then the rest, since dropping a
  // checkpoint that shares its pages with another can make that one freeing.
  const helios::PagePool& pool = pools_->pool(group);
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
