// The paged KV cache's bookkeeping (host side): a pool of fixed-size pages with reference counts,
// and per-sequence block tables that grow by appending, share pages by forking (prefix reuse),
// and give pages back when freed. The pages' bytes live in a KvCache (backend.h); when a forked
// sequence appends into a page it shares, append() allocates a private copy and reports the
// PageCopy the caller must run (Backend::kv_copy_pages) before the next step.
// Owned by the engine thread of one device; not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "helios/backend.h"

namespace flare::helios {

class PagePool {
 public:
  explicit PagePool(std::int32_t n_pages);

  std::int32_t n_pages() const { return std::int32_t(ref_counts_.size()); }
  std::int32_t n_free() const { return std::int32_t(free_.size()); }
  std::int32_t n_used() const { return n_pages() - n_free(); }
  std::int32_t ref_count(std::int32_t page) const;

  std::int32_t allocate();             // a page with one reference, or -1 when none is free
  void retain(std::int32_t page);      // one more reference
  void release(std::int32_t page);     // one reference less; the page is free again at zero

 private:
  void check(std::int32_t page) const;
  std::vector<std::int32_t> ref_counts_;
  std::vector<std::int32_t> free_;  // a stack: the most recently freed page is reused first
};

class SequencePages {
 public:
  SequencePages(PagePool& pool, std::int32_t page_size_tokens);
  ~SequencePages() { free(); }
  SequencePages(SequencePages&& other) noexcept;
  SequencePages& operator=(SequencePages&& other) noexcept;
  SequencePages(const SequencePages&) = delete;
  SequencePages& operator=(const SequencePages&) = delete;

  std::int32_t n_tokens() const { return n_tokens_; }
  const std::vector<std::int32_t>& pages() const { return pages_; }

  // Makes room for n more tokens. False, with nothing changed, when the pool lacks free pages.
  // Copy-on-write of a shared, partly filled last page is appended to `copies`.
  bool append(std::int32_t n, std::vector<PageCopy>& copies);
  // Drops the last n tokens (speculation rollback), releasing pages no longer needed.
  void truncate(std::int32_t n_tokens);
  // A sequence sharing every page of this one (each page gains a reference).
  SequencePages fork() const;
  // Releases every page; the sequence is empty afterwards.
  void free();

 private:
  PagePool* pool_;
  std::int32_t page_size_;
  std::int32_t n_tokens_ = 0;
  std::vector<std::int32_t> pages_;
};

}  // namespace flare::helios
