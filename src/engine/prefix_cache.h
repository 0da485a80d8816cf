// The prefix cache (spec cli-design 3.3): retained KV checkpoints keyed by chained hashes of full
// token blocks (one block = one KV page), so a later request repeating a prefix skips recomputing
// it. A checkpoint is a fork of a sequence's pages cut to whole pages; it shares pages with live
// sequences and other checkpoints through the pool's reference counts (nano-vllm's reference-counted
// blocks with chained hashes). Checkpoints are taken at prompt boundaries (a prompt's last full
// page) and answer boundaries (a finished choice), bounded in number (eight per concurrency slot),
// and evicted least recently used first when the pool needs pages.
// With sliding-window history groups (history_pages.h) a checkpoint holds, in those groups, only
// the pages its end's window reads: a lookup hits a checkpoint only where it ends (or where the
// window pages of an earlier cut are still held), and a checkpoint replaces the ones it extends
// only when it holds their windows too.
// Owned by the engine thread, beside the page pools it borrows; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "helios/history_pages.h"

namespace flare::engine {

// Chained hashes of the full blocks of `tokens`: hash[i] covers tokens [0, (i + 1) * block).
std::vector<std::uint64_t> prefix_block_hashes(std::span<const std::int32_t> tokens, std::int32_t block_tokens);

class PrefixCache {
 public:
  PrefixCache(helios::HistoryPools& pools, std::int32_t page_size_tokens, std::int32_t max_entries);
  ~PrefixCache() { clear(); }
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest cached prefix of `tokens` of at most `max_tokens` tokens (whole pages), as a
  // sequence holding its own references to those pages; empty when nothing matches.
  helios::HistoryPages lookup(std::span<const std::int32_t> tokens, std::int32_t max_tokens);
  // Retains the whole pages of `pages` as the KV of tokens [0, floor(n / page) * page), where n is
  // min(pages.n_tokens(), tokens.size()). Checkpoints this one extends are dropped (it holds
  // their pages too); an identical checkpoint is only refreshed. Evicts beyond max_entries.
  void insert(std::span<const std::int32_t> tokens, const helios::HistoryPages& pages);
  // Evicts checkpoints, least recently used first and those that free pages before those that do
  // not, until history group `group`'s pool has n_free_wanted free pages. False when that is not
  // reached.
  bool evict_until_free(std::int32_t n_free_wanted, std::int32_t group = 0);
  void clear();

  std::int32_t n_entries() const { return std::int32_t(entries_.size()); }
  std::int32_t max_entries() const { return max_entries_; }
  // Pages of a group whose only holder is this cache (what evicting everything would free there).
  std::int32_t n_pages_exclusive(std::int32_t group = 0) const;

 private:
  struct Entry {
    std::vector<std::uint64_t> hashes;  // [n_blocks] chained block hashes
    std::vector<std::int32_t> tokens;   // [n_blocks * page] to rule out hash collisions
    helios::HistoryPages pages;         // exactly n_blocks pages in each group
    std::uint64_t last_use = 0;
  };
  void erase(std::uint64_t id);
  bool frees_pages(const Entry& entry, std::int32_t group) const;
  std::uint64_t least_recent(bool only_freeing, std::int32_t group) const;

  helios::HistoryPools* pools_;
  std::int32_t page_size_;
  std::int32_t max_entries_;
  std::uint64_t next_id_ = 1;
  std::uint64_t clock_ = 0;
  std::map<std::uint64_t, Entry> entries_;
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> index_;  // block hash -> entry ids
};

}  // namespace flare::engine
