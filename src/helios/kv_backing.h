// Which memory granules of a KV cache's address space hold its backed pages. A KV cache keeps every
// page of a layer at base + (layer * n_pages + page) * page_bytes (backend.h), so "pages [0, k)
// backed" means one byte range per layer; a device commits memory in granules (its allocation
// granularity), and a layer's range need not start on a granule, so neighbouring layers may share
// one. This file is the arithmetic between the two: which granules backing more pages adds, and how
// many pages a set of committed granules backs. Pure functions, shared by every backend and tested
// on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "helios/backend.h"

namespace flare::helios {

struct ByteRange {
  std::size_t offset_bytes = 0;
  std::size_t size_bytes = 0;
  std::size_t end_bytes() const { return offset_bytes + size_bytes; }
};

// What is committed: the granules touching pages [0, backed_pages) of every layer and, with
// `tail`, those touching the pages past the growable ones (kept backed from the start).
struct KvBackingState {
  std::int32_t backed_pages = 0;
  bool tail = false;
};

class KvGranules {
 public:
  // `n_growable_pages`: the pages [0, n) that grow on demand; granule_bytes >= 1.
  KvGranules(const KvCacheLayout& layout, std::int32_t n_growable_pages, std::size_t granule_bytes);

  std::size_t reservation_bytes() const;  // the layout's bytes, rounded up to a granule
  // The granules `to` commits that `from` does not, as runs of whole granules in address order
  // (`to` must hold at least what `from` holds).
  std::vector<ByteRange> runs_between(KvBackingState from, KvBackingState to) const;
  // The growable pages of every layer that the granules of `state` back (at least
  // state.backed_pages: a granule's rounding backs more).
  std::int32_t pages_backed(KvBackingState state) const;
  std::size_t committed_bytes(KvBackingState state) const;
  // Pages per growth step: the fewest whose bytes fill whole granules in one layer, times what
  // makes one step hold at least min_step_bytes over all layers.
  std::int32_t chunk_pages(std::size_t min_step_bytes) const;

 private:
  // The byte ranges of layer `layer` that `state` backs (the growable prefix, then the tail), each
  // widened to whole granules; empty ranges are left out.
  std::vector<ByteRange> layer_ranges(KvBackingState state, std::int64_t layer) const;
  bool committed(KvBackingState state, std::size_t granule) const;
  std::size_t align_down(std::size_t x) const { return x / granule_ * granule_; }
  std::size_t align_up(std::size_t x) const { return (x + granule_ - 1) / granule_ * granule_; }

  std::int64_t n_layers_;
  std::int32_t n_pages_;
  std::int32_t n_growable_;
  std::size_t page_bytes_;
  std::size_t layer_bytes_;  // n_pages * page_bytes: one layer's stride
  std::size_t granule_;
};

// Bytes of memory behind a KV cache now (every byte of a cache allocate_kv_cache made).
std::size_t kv_backed_bytes(const KvCache& cache);

}  // namespace flare::helios
