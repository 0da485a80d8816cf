// KV cache granule arithmetic (see kv_backing.h).
#include "helios/kv_backing.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "common/error.h"

namespace flare::helios {

KvGranules::KvGranules(const KvCacheLayout& layout, std::int32_t n_growable_pages, std::size_t granule_bytes)
    : n_layers_(layout.n_layers),
      n_pages_(layout.n_pages),
      n_growable_(n_growable_pages),
      page_bytes_(layout.page_bytes()),
      layer_bytes_(layout.page_bytes() * std::size_t(layout.n_pages)),
      granule_(granule_bytes) {
  if (n_layers_ < 1 || n_pages_ < 1 || page_bytes_ == 0 || granule_ == 0 || n_growable_ < 0 || n_growable_ > n_pages_) {
    fail(ExitCode::failure, "internal: KV granules of {} bytes over {} layers x {} pages ({} growable) of {} bytes",
         granule_, n_layers_, n_pages_, n_growable_, page_bytes_);
  }
}

std::size_t KvGranules::reservation_bytes() const { return align_up(layer_bytes_ * std::size_t(n_layers_)); }

std::vector<ByteRange> KvGranules::layer_ranges(KvBackingState state, std::int64_t layer) const {
  std::vector<ByteRange> out;
  const std::size_t base = std::size_t(layer) * layer_bytes_;
  const std::int32_t backed = std::min(state.backed_pages, n_growable_);
  if (backed > 0) {
    const std::size_t begin = align_down(base);
    out.push_back({begin, align_up(base + std::size_t(backed) * page_bytes_) - begin});
  }
  if (state.tail && n_growable_ < n_pages_) {
    const std::size_t begin = align_down(base + std::size_t(n_growable_) * page_bytes_);
    out.push_back({begin, align_up(base + layer_bytes_) - begin});
  }
  return out;
}

bool KvGranules::committed(KvBackingState state, std::size_t granule) const {
  const std::size_t begin = granule * granule_, end = begin + granule_;
  const auto first = std::int64_t(begin / layer_bytes_);
  const std::int64_t last = std::min<std::int64_t>(n_layers_ - 1, std::int64_t((end - 1) / layer_bytes_));
  for (std::int64_t layer = first; layer <= last; ++layer) {
    for (const ByteRange& range : layer_ranges(state, layer)) {
      if (range.offset_bytes < end && range.end_bytes() > begin) return true;
    }
  }
  return false;
}

std::vector<ByteRange> KvGranules::runs_between(KvBackingState from, KvBackingState to) const {
  if (to.backed_pages < from.backed_pages || (from.tail && !to.tail)) {
    fail(ExitCode::failure, "internal: KV backing shrinking from {} pages to {}", from.backed_pages, to.backed_pages);
  }
  std::vector<ByteRange> runs;
  // New bytes [begin, end): its granules, less those committed before and those an earlier range
  // of this call took. Only the first and the last granule can be either: the granules between
  // lie wholly inside bytes nothing backed.
  auto add = [&](std::size_t begin, std::size_t end) {
    if (begin >= end) return;
    std::size_t first = align_down(begin), past = align_up(end);
    if (!runs.empty()) first = std::max(first, runs.back().end_bytes());
    if (first < past && committed(from, first / granule_)) first += granule_;
    if (first < past && committed(from, (past - granule_) / granule_)) past -= granule_;
    if (first >= past) return;
    if (!runs.empty() && runs.back().end_bytes() == first) runs.back().size_bytes += past - first;
    else runs.push_back({first, past - first});
  };
  const std::int32_t from_pages = std::min(from.backed_pages, n_growable_);
  const std::int32_t to_pages = std::min(to.backed_pages, n_growable_);
  const bool new_tail = to.tail && !from.tail && n_growable_ < n_pages_;
  for (std::int64_t layer = 0; layer < n_layers_; ++layer) {  // address order
    const std::size_t base = std::size_t(layer) * layer_bytes_;
    add(base + std::size_t(from_pages) * page_bytes_, base + std::size_t(to_pages) * page_bytes_);
    if (new_tail) add(base + std::size_t(n_growable_) * page_bytes_, base + layer_bytes_);
  }
  return runs;
}

std::int32_t KvGranules::pages_backed(KvBackingState state) const {
  std::int32_t pages = n_growable_;
  for (std::int64_t layer = 0; layer < n_layers_ && pages > 0; ++layer) {
    // The committed granules that can hold this layer's growable pages: its own, and those of the
    // layers around it whose granules reach into it (a granule may hold several layers' bytes).
    const std::size_t base = std::size_t(layer) * layer_bytes_;
    const std::size_t limit = base + std::size_t(n_growable_) * page_bytes_;
    std::int64_t first = layer, last = layer;
    while (first > 0 && align_up(std::size_t(first) * layer_bytes_) > base) --first;
    while (last + 1 < n_layers_ && align_down(std::size_t(last + 1) * layer_bytes_) < limit) ++last;
    std::vector<ByteRange> ranges;
    for (std::int64_t other = first; other <= last; ++other) {
      for (const ByteRange& r : layer_ranges(state, other)) ranges.push_back(r);
    }
    std::sort(ranges.begin(), ranges.end(),
              [](const ByteRange& a, const ByteRange& b) { return a.offset_bytes < b.offset_bytes; });
    std::size_t covered = base;  // [base, covered) lies in committed granules
    for (const ByteRange& r : ranges) {
      if (r.offset_bytes > covered) break;
      covered = std::max(covered, r.end_bytes());
    }
    pages = std::min<std::int32_t>(pages, std::int32_t(std::min<std::size_t>((covered - base) / page_bytes_,
                                                                             std::size_t(n_growable_))));
  }
  return pages;
}

std::size_t KvGranules::committed_bytes(KvBackingState state) const {
  std::size_t total = 0, end = 0;
  for (std::int64_t layer = 0; layer < n_layers_; ++layer) {  // ranges come in address order
    for (const ByteRange& r : layer_ranges(state, layer)) {
      const std::size_t begin = std::max(r.offset_bytes, end);
      if (r.end_bytes() > begin) total += r.end_bytes() - begin;
      end = std::max(end, r.end_bytes());
    }
  }
  return total;
}

std::int32_t KvGranules::chunk_pages(std::size_t min_step_bytes) const {
  const std::size_t fill = granule_ / std::gcd(granule_, page_bytes_);  // pages whose bytes fill whole granules
  const std::size_t step_bytes = fill * page_bytes_ * std::size_t(n_layers_);
  const std::size_t n_fills = std::max<std::size_t>(1, (min_step_bytes + step_bytes - 1) / step_bytes);
  return std::int32_t(std::min<std::size_t>(fill * n_fills, std::size_t(n_pages_)));
}

std::size_t kv_backed_bytes(const KvCache& cache) {
  if (!cache.storage) return 0;
  if (cache.granule_bytes == 0) return cache.storage->size_bytes();
  const KvGranules granules(cache.layout, cache.n_growable_pages, cache.granule_bytes);
  return granules.committed_bytes({cache.backed_pages, cache.n_growable_pages < cache.layout.n_pages});
}

}  // namespace flare::helios
