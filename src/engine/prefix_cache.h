// The prefix cache (spec cli-design 3.3): retained KV checkpoints keyed by chained hashes of full
// token blocks (one block = one KV page), so a later request repeating a prefix skips recomputing
// it. A checkpoint is a fork of a sequence's pages cut to whole pages; it shares pages with live
// sequences and other checkpoints through the pool's reference counts (nano-vllm's reference-counted
// blocks with chained hashes). Checkpoints are taken at prompt boundaries (a prompt's last full
// page) and answer boundaries (a finished choice), bounded in number (eight per concurrency slot),
// and evicted least recently used first when the pool needs pages.
// Owned by the engine thread, beside the PagePool it borrows; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "helios/page_pool.h"

namespace flare::engine {

// Chained hashes of the full blocks of `tokens`: hash[i] covers tokens [0, (i + 1) * block).
std::vector<std::uint64_t> prefix_block_hashes(std::span<const std::int32_t> tokens, std::int32_t block_tokens);

class PrefixCache {
 public:
  PrefixCache(helios::PagePool& pool, std::int32_t page_size_tokens, std::int32_t max_entries);
  ~PrefixCache() { clear(); }
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest cached prefix of `tokens` of at most `max_tokens` tokens (whole pages), as a
  // sequence holding its own references to those pages; empty when nothing matches.
  helios::SequencePages lookup(std::span<const std::int32_t> tokens, std::int32_t max_tokens);
  // Retains the whole pages of `pages` as the KV of tokens [0, floor(n / page) * page), where n is
  // min(pages.n_tokens(), tokens.size()). Checkpoints this one extends are dropped (it holds
  // their pages too); an identical checkpoint is only refreshed. Evicts beyond max_entries.
  void insert(std::span<const std::int32_t> tokens, const helios::SequencePages& pages);
  // Evicts checkpoints, least recently used first and those that free pages before those that do
  // not, until the pool has n_free_wanted free pages. False when that is not reached.
  bool evict_until_free(std::int32_t n_free_wanted);
  void clear();

  std::int32_t n_entries() const { return std::int32_t(entries_.size()); }
  std::int32_t max_entries() const { return max_entries_; }
  // Pages whose only holder is this cache (what evicting everything would free).
  std::int32_t n_pages_exclusive() const;

 private:
  struct Entry {
    std::vector<std::uint64_t> hashes;  // [n_blocks] chained block hashes
    std::vector<std::int32_t> tokens;   // [n_blocks * page] to rule out hash collisions
    helios::SequencePages pages;        // exactly n_blocks pages
    std::uint64_t last_use = 0;
  };
  void erase(std::uint64_t id);
  bool frees_pages(const Entry& entry) const;
  std::uint64_t least_recent(bool only_freeing) const;

  helios::PagePool* pool_;
  std::int32_t page_size_;
  std::int32_t max_entries_;
  std::uint64_t next_id_ = 1;
  std::uint64_t clock_ = 0;
  std::map<std::uint64_t, Entry> entries_;
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> index_;  // block hash -> entry ids
};

}  // namespace flare::engine
