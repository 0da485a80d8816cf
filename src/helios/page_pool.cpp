// Page pool and block tables (see page_pool.h).
#include "helios/page_pool.h"

#include <algorithm>
#include <utility>

#include "common/error.h"

namespace flare::helios {

PagePool::PagePool(std::int32_t n_pages) {
  if (n_pages < 1) fail_usage("page pool needs at least one page, got {}", n_pages);
  ref_counts_.assign(std::size_t(n_pages), 0);
  free_.reserve(std::size_t(n_pages));
  add_free(0, n_pages);
}

void PagePool::add_free(std::int32_t begin, std::int32_t end) {
  for (std::int32_t page = end - 1; page >= begin; --page) free_.push_back(page);  // lowest on top
  n_backed_ = end;
}

void PagePool::set_backing(std::int32_t n_backed, GrowHook grow) {
  if (n_used() != 0) fail(ExitCode::failure, "internal: page pool backing changed with {} pages in use", n_used());
  if (n_backed < 0 || n_backed > n_pages()) {
    fail(ExitCode::failure, "internal: {} backed pages in a pool of {}", n_backed, n_pages());
  }
  free_.clear();
  add_free(0, n_backed);
  grow_ = std::move(grow);
  refused_at_.reset();
}

void PagePool::set_growth_retry(std::chrono::milliseconds interval, Clock clock) {
  if (interval.count() < 0 || !clock) fail(ExitCode::failure, "internal: page pool growth retry without a clock");
  retry_interval_ = interval;
  clock_ = std::move(clock);
}

bool PagePool::can_grow() const {
  if (n_backed_ >= n_pages() || !grow_) return false;
  return !refused_at_ || clock_() - *refused_at_ >= retry_interval_;
}

bool PagePool::make_free(std::int32_t n) {
  if (n <= n_free()) return true;
  if (!can_grow()) return false;
  const std::int32_t wanted = std::min(n_pages(), n_backed_ + (n - n_free()));
  const std::int32_t backed = std::clamp(grow_(wanted), n_backed_, n_pages());
  if (backed < wanted) {
    refused_at_ = clock_();
  } else {
    refused_at_.reset();
  }
  add_free(n_backed_, backed);
  return n <= n_free();
}

void PagePool::check(std::int32_t page) const {
  if (page < 0 || page >= n_pages()) fail(ExitCode::failure, "internal: page {} outside the pool", page);
  if (ref_counts_[std::size_t(page)] <= 0) fail(ExitCode::failure, "internal: page {} is not allocated", page);
}

std::int32_t PagePool::ref_count(std::int32_t page) const {
  if (page < 0 || page >= n_pages()) return 0;
  return ref_counts_[std::size_t(page)];
}

std::int32_t PagePool::allocate() {
  if (!make_free(1)) return -1;
  const std::int32_t page = free_.back();
  free_.pop_back();
  ref_counts_[std::size_t(page)] = 1;
  return page;
}

void PagePool::retain(std::int32_t page) {
  check(page);
  ++ref_counts_[std::size_t(page)];
}

void PagePool::release(std::int32_t page) {
  check(page);
  if (--ref_counts_[std::size_t(page)] == 0) free_.push_back(page);
}

SequencePages::SequencePages(PagePool& pool, std::int32_t page_size_tokens)
    : pool_(&pool), page_size_(page_size_tokens) {
  if (page_size_tokens < 1) fail_usage("page size must be at least one token");
}

SequencePages::SequencePages(SequencePages&& other) noexcept
    : pool_(other.pool_), page_size_(other.page_size_), n_tokens_(other.n_tokens_),
      pages_(std::move(other.pages_)), n_released_(other.n_released_) {
  other.n_tokens_ = 0;
  other.pages_.clear();
  other.n_released_ = 0;
}

SequencePages& SequencePages::operator=(SequencePages&& other) noexcept {
  if (this != &other) {
    free();
    pool_ = other.pool_;
    page_size_ = other.page_size_;
    n_tokens_ = std::exchange(other.n_tokens_, 0);
    pages_ = std::move(other.pages_);
    n_released_ = std::exchange(other.n_released_, 0);
    other.pages_.clear();
  }
  return *this;
}

std::int32_t SequencePages::pages_to_append(std::int32_t n) const {
  if (n <= 0) return 0;
  const std::int64_t n_pages_after = (std::int64_t(n_tokens_) + n + page_size_ - 1) / page_size_;
  const bool partial_shared = n_tokens_ % page_size_ != 0 && pages_.back() != k_released &&
                              pool_->ref_count(pages_.back()) > 1;
  return std::int32_t(n_pages_after - std::int64_t(pages_.size())) + (partial_shared ? 1 : 0);
}

bool SequencePages::append(std::int32_t n, std::vector<PageCopy>& copies) {
  if (n < 0) fail(ExitCode::failure, "internal: append of {} tokens", n);
  if (n == 0) return true;
  const std::int64_t n_after = std::int64_t(n_tokens_) + n;
  const std::int64_t n_pages_after = (n_after + page_size_ - 1) / page_size_;
  const std::int64_t n_new = n_pages_after - std::int64_t(pages_.size());
  const bool partial_shared = n_tokens_ % page_size_ != 0 && pages_.back() != k_released &&
                              pool_->ref_count(pages_.back()) > 1;
  if (!pool_->make_free(std::int32_t(n_new) + (partial_shared ? 1 : 0))) return false;
  if (partial_shared) {  // copy-on-write: this sequence writes into its last page
    const std::int32_t copy = pool_->allocate();
    copies.push_back({pages_.back(), copy});
    pool_->release(pages_.back());
    pages_.back() = copy;
  }
  for (std::int64_t i = 0; i < n_new; ++i) pages_.push_back(pool_->allocate());
  n_tokens_ = std::int32_t(n_after);
  return true;
}

void SequencePages::truncate(std::int32_t n_tokens) {
  if (n_tokens < 0 || n_tokens > n_tokens_) fail(ExitCode::failure, "internal: truncate to {}", n_tokens);
  const std::size_t n_pages = std::size_t((n_tokens + page_size_ - 1) / page_size_);
  while (pages_.size() > n_pages) {
    if (pages_.back() == k_released) {
      --n_released_;
    } else {
      pool_->release(pages_.back());
    }
    pages_.pop_back();
  }
  n_tokens_ = n_tokens;
}

void SequencePages::release_before(std::int32_t position) {
  const auto n_before = std::size_t(std::clamp(position, 0, n_tokens_) / page_size_);
  for (std::size_t i = std::size_t(n_released_); i < std::min(n_before, pages_.size()); ++i) {
    pool_->release(pages_[i]);
    pages_[i] = k_released;
    ++n_released_;
  }
}

bool SequencePages::holds_from(std::int32_t position) const {
  return std::max(position, 0) / page_size_ >= n_released_;
}

SequencePages SequencePages::fork() const {
  SequencePages out(*pool_, page_size_);
  for (std::int32_t page : pages_) {
    if (page != k_released) pool_->retain(page);
  }
  out.pages_ = pages_;
  out.n_tokens_ = n_tokens_;
  out.n_released_ = n_released_;
  return out;
}

void SequencePages::free() {
  for (std::int32_t page : pages_) {
    if (page != k_released) pool_->release(page);
  }
  pages_.clear();
  n_tokens_ = 0;
  n_released_ = 0;
}

}  // namespace flare::helios
