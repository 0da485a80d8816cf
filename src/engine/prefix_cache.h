// The prefix cache (spec cli-design 3.3): retained KV checkpoints keyed by chained hashes of full
// token blocks (one block = one KV page), so a later request repeating a prefix skips recomputing
// it. A checkpoint is a fork of a sequence's pages cut at its end; it shares pages with live
// sequences and other checkpoints through the pool's reference counts (nano-vllm's reference-counted
// blocks with chained hashes). Checkpoints are taken at prompt boundaries (a prompt's end) and
// answer boundaries (a finished choice), bounded in number (eight per concurrency slot), and
// evicted least recently used first when the pool needs pages.
//
// Partial pages (snapshots): a checkpoint that ends mid-page keeps its partly filled last page, a
// snapshot page, so a next turn repeating a whole conversation finds all of it, not only its whole
// pages. The snapshot is the sequence's own last page, shared: the side that writes into it later
// (the live sequence after a prompt checkpoint, a request that hit the checkpoint) gets a private
// copy by copy-on-write (SequencePages::append, Backend::kv_copy_pages), so the page is acquired
// from the shared KV backing only on demand, and never where the checkpointed sequence ends there
// (an answer). Snapshots are bounded (max_snapshots, eight per concurrency slot by default), and
// under pressure they go first: a snapshot is cut back to the checkpoint's whole pages before any
// checkpoint is evicted, and a sequence that must copy a snapshot while no page is free drops it
// instead (release_snapshots_of).
// A lookup hits at any token of a checkpoint: the longest common prefix of the prompt and a
// checkpoint's tokens, whole pages or not. A hit that ends mid-page shares that page until the
// request writes into it (copy-on-write again).
//
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
  // max_snapshots: checkpoints that may end mid-page at once (0: every checkpoint is cut to whole
  // pages, as before snapshots).
  PrefixCache(helios::HistoryPools& pools, std::int32_t page_size_tokens, std::int32_t max_entries,
              std::int32_t max_snapshots);
  ~PrefixCache() { clear(); }
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest cached prefix of `tokens` of at most `max_tokens` tokens, as a sequence holding
  // its own references to those pages (a partly filled last page shared: copy-on-write); empty
  // when nothing matches.
  helios::HistoryPages lookup(std::span<const std::int32_t> tokens, std::int32_t max_tokens);
  // Retains `pages` as the KV of tokens [0, n), n = min(pages.n_tokens(), tokens.size()) (cut to
  // whole pages when no snapshot is allowed). Needs at least one whole page. Checkpoints this one
  // extends are dropped (it holds their pages too); one that already covers it is only refreshed.
  // Evicts beyond max_entries, and cuts the least recently used snapshot beyond max_snapshots.
  void insert(std::span<const std::int32_t> tokens, const helios::HistoryPages& pages);
  // Evicts, until history group `group`'s pool has n_free_wanted free pages: first snapshot pages
  // only the cache holds (cut back to whole pages), then checkpoints, least recently used first and
  // those that free pages before those that do not. False when that is not reached.
  bool evict_until_free(std::int32_t n_free_wanted, std::int32_t group = 0);
  // Cuts back every snapshot whose partial page in `group` is `page` (a live sequence would have
  // to copy it and no page is free). True when one was.
  bool release_snapshots_of(std::int32_t group, std::int32_t page);
  void clear();

  std::int32_t n_entries() const { return std::int32_t(entries_.size()); }
  std::int32_t max_entries() const { return max_entries_; }
  std::int32_t n_snapshots() const;  // checkpoints ending mid-page
  std::int32_t max_snapshots() const { return max_snapshots_; }
  // Pages of a group whose only holder is this cache (what evicting everything would free there).
  std::int32_t n_pages_exclusive(std::int32_t group = 0) const;

 private:
  struct Entry {
    std::vector<std::uint64_t> hashes;  // [n / page] chained hashes of the whole blocks
    std::vector<std::int32_t> tokens;   // [n]: whole blocks, then a snapshot's partial tail
    helios::HistoryPages pages;         // ceil(n / page) pages in each group, n tokens
    std::uint64_t last_use = 0;
  };
  bool is_snapshot(const Entry& entry) const { return entry.tokens.size() % std::size_t(page_size_) != 0; }
  void erase(std::uint64_t id);
  // Drops the entry's partial page (the whole pages stay, unless their windows are gone too).
  void cut_snapshot(std::uint64_t id);
  // How many of tokens[0, limit) entry `entry` holds, given that whole blocks [0, n_whole) match.
  std::size_t common_tokens(const Entry& entry, std::span<const std::int32_t> tokens, std::size_t n_whole) const;
  bool frees_pages(const Entry& entry, std::int32_t group) const;
  bool snapshot_frees_page(const Entry& entry, std::int32_t group) const;
  std::uint64_t least_recent(bool only_freeing, std::int32_t group) const;
  std::uint64_t least_recent_snapshot(bool only_freeing, std::int32_t group) const;

  helios::HistoryPools* pools_;
  std::int32_t page_size_;
  std::int32_t max_entries_;
  std::int32_t max_snapshots_;
  std::uint64_t next_id_ = 1;
  std::uint64_t clock_ = 0;
  std::map<std::uint64_t, Entry> entries_;
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> index_;  // block hash -> entry ids
};

}  // namespace flare::engine
