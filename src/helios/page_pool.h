// The paged KV cache's bookkeeping (host side): a pool of fixed-size pages with reference counts,
// and per-sequence block tables that grow by appending, share pages by forking (prefix reuse),
// and give pages back when freed. The pages' bytes live in a KvCache (backend.h); when a forked
// sequence appends into a page it shares, append() allocates a private copy and reports the
// PageCopy the caller must run (Backend::kv_copy_pages) before the next step.
//
// The pool may start with only some of its pages backed by memory (a KV cache reserved and grown on
// demand, Backend::kv_grow): it hands out pages of the backed range [0, n_backed) only, and when
// none of those is free it asks its grow hook for more. A hook that comes back short (the device
// has no more memory) leaves the pool as full as a pool of n_backed pages until a retry interval
// (1 s by default) has passed: memory another process held may have come back by then, while asking
// on every allocation would spend driver calls that fail the same way.
// Owned by the engine thread of one device; not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "helios/backend.h"

namespace flare::helios {

class PagePool {
 public:
  // Backs more pages: given how many pages should be backed, returns how many are now (the
  // current count or more; fewer than asked when the memory ran out). Called on the pool's thread.
  using GrowHook = std::function<std::int32_t(std::int32_t n_pages_wanted)>;
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  explicit PagePool(std::int32_t n_pages);  // every page backed
  // Only pages [0, n_backed) are backed; `grow` backs more. Call before any page is allocated.
  void set_backing(std::int32_t n_backed, GrowHook grow);
  // After a refused growth the hook is asked again once `interval` has passed on `clock`
  // (default: 1 s of std::chrono::steady_clock).
  void set_growth_retry(std::chrono::milliseconds interval, Clock clock);

  std::int32_t n_pages() const { return std::int32_t(ref_counts_.size()); }  // the pool's capacity
  std::int32_t n_backed() const { return n_backed_; }
  std::int32_t n_free() const { return std::int32_t(free_.size()); }  // backed and free
  std::int32_t n_used() const { return n_backed_ - n_free(); }
  // Free pages plus those that may still be backed: what the pool can hand out, growth permitting.
  std::int32_t n_available() const { return n_free() + (can_grow() ? n_pages() - n_backed_ : 0); }
  // Whether the hook may be asked for more: pages are left to back and no refusal is recent.
  bool can_grow() const;
  std::int32_t ref_count(std::int32_t page) const;

  // Grows the backed range, as far as the hook allows, until n pages are free; true when they are.
  bool make_free(std::int32_t n);
  std::int32_t allocate();             // a page with one reference, or -1 when none is free or can be backed
  void retain(std::int32_t page);      // one more reference
  void release(std::int32_t page);     // one reference less; the page is free again at zero

 private:
  void check(std::int32_t page) const;
  void add_free(std::int32_t begin, std::int32_t end);  // newly backed pages [begin, end)
  std::vector<std::int32_t> ref_counts_;
  std::vector<std::int32_t> free_;  // a stack: the most recently freed page is reused first
  std::int32_t n_backed_ = 0;
  GrowHook grow_;
  std::chrono::milliseconds retry_interval_{1000};
  Clock clock_ = [] { return std::chrono::steady_clock::now(); };
  std::optional<std::chrono::steady_clock::time_point> refused_at_;  // the hook's last short answer
};

class SequencePages {
 public:
  // The block table entry of a page given back (release_before): no query reads it any more.
  static constexpr std::int32_t k_released = -1;

  SequencePages(PagePool& pool, std::int32_t page_size_tokens);
  ~SequencePages() { free(); }
  SequencePages(SequencePages&& other) noexcept;
  SequencePages& operator=(SequencePages&& other) noexcept;
  SequencePages(const SequencePages&) = delete;
  SequencePages& operator=(const SequencePages&) = delete;

  std::int32_t n_tokens() const { return n_tokens_; }
  // Page ids by position / page size; k_released where release_before gave a page back.
  const std::vector<std::int32_t>& pages() const { return pages_; }
  std::int32_t n_held() const { return std::int32_t(pages_.size()) - n_released_; }
  PagePool& pool() const { return *pool_; }
  std::int32_t page_size_tokens() const { return page_size_; }
  // Pages append(n) would take from the pool (a copy of a shared partial last page included).
  std::int32_t pages_to_append(std::int32_t n) const;

  // Makes room for n more tokens. False, with nothing changed, when the pool lacks free pages.
  // Copy-on-write of a shared, partly filled last page is appended to `copies`.
  bool append(std::int32_t n, std::vector<PageCopy>& copies);
  // Drops the last n tokens (speculation rollback), releasing pages no longer needed.
  void truncate(std::int32_t n_tokens);
  // A sequence sharing every page of this one (each page gains a reference).
  SequencePages fork() const;
  // Releases every page; the sequence is empty afterwards.
  void free();
  // Gives back every page wholly before `position` (a sliding window no longer reaches them); their
  // entries become k_released. The tokens stay counted.
  void release_before(std::int32_t position);
  // Whether the pages of positions [position, n_tokens()) are all held.
  bool holds_from(std::int32_t position) const;

 private:
  PagePool* pool_;
  std::int32_t page_size_;
  std::int32_t n_tokens_ = 0;
  std::vector<std::int32_t> pages_;
  std::int32_t n_released_ = 0;  // leading entries that are k_released
};

}  // namespace flare::helios
