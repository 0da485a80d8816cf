// Backend-independent pieces of the interface: tensor views, host sampling and KV caches (whole,
// or reserved and grown through the backend's commit primitives).
#include "helios/backend.h"

#include <algorithm>

#include "common/error.h"
#include "common/sizes.h"
#include "helios/kv_backing.h"

namespace flare::helios {
namespace {

// A non-owning Buffer over a range of device memory, so download() can read a tensor view.
class HostView final : public Buffer {
 public:
  HostView(void* data, std::size_t size_bytes) : data_(data), size_(size_bytes) {}
  void* data() const override { return data_; }
  std::size_t size_bytes() const override { return size_; }

 private:
  void* data_;
  std::size_t size_;
};

void kv_layout_validate(const KvCacheLayout& layout) {
  if (layout.n_pages < 1 || layout.page_size_tokens < 1 || layout.n_layers < 1) {
    fail_usage("KV cache needs at least one page, one token per page and one layer");
  }
  if (layout.dtype != DType::bf16 && layout.dtype != DType::f8_e4m3 && layout.dtype != DType::f32) {
    fail_usage("KV cache dtype {} is not supported (bf16, f8_e4m3, f32)", dtype_name(layout.dtype));
  }
}

}  // namespace

Tensor Tensor::of(const Buffer& buffer, DType dtype, std::int64_t rows, std::int64_t cols) {
  if (std::size_t(rows * cols) * dtype_size_bytes(dtype) > buffer.size_bytes()) {
    fail(ExitCode::failure, "internal: tensor [{}, {}] {} exceeds its buffer of {} bytes", rows, cols,
         dtype_name(dtype), buffer.size_bytes());
  }
  return Tensor{buffer.data(), dtype, rows, cols, cols};
}

Tensor Tensor::of_batched(const Buffer& buffer, DType dtype, std::int64_t n_batch, std::int64_t rows,
                          std::int64_t cols) {
  if (n_batch < 1 || std::size_t(n_batch * rows * cols) * dtype_size_bytes(dtype) > buffer.size_bytes()) {
    fail(ExitCode::failure, "internal: tensor [{}, {}, {}] {} exceeds its buffer of {} bytes", n_batch, rows, cols,
         dtype_name(dtype), buffer.size_bytes());
  }
  return Tensor{buffer.data(), dtype, rows, cols, cols, n_batch, rows * cols};
}

Tensor Tensor::batch(std::int64_t index) const {
  if (index < 0 || index >= n_batch) fail(ExitCode::failure, "internal: matrix {} of a stack of {}", index, n_batch);
  Tensor out = *this;
  out.data = static_cast<char*>(data) + index * batch_stride * std::int64_t(dtype_size_bytes(dtype));
  out.n_batch = 1;
  out.batch_stride = 0;
  return out;
}

Tensor Tensor::slice_cols(std::int64_t begin, std::int64_t n) const {
  Tensor out = *this;
  out.data = static_cast<char*>(data) + begin * std::int64_t(dtype_size_bytes(dtype));
  out.cols = n;
  return out;
}

Tensor Tensor::slice_rows(std::int64_t begin, std::int64_t n) const {
  Tensor out = *this;
  out.data = static_cast<char*>(data) + begin * stride * std::int64_t(dtype_size_bytes(dtype));
  out.rows = n;
  return out;
}

std::size_t KvCacheLayout::page_bytes() const {
  return 2 * std::size_t(page_size_tokens) * std::size_t(n_kv_heads) * std::size_t(head_dim) *
         dtype_size_bytes(dtype);
}

std::vector<SampledToken> Backend::sample(const Tensor& logits, std::span<const SampleRequest> requests) {
  if (logits.dtype != DType::f32 || std::int64_t(requests.size()) != logits.rows) {
    fail(ExitCode::failure, "internal: sampling {} requests from {} {} logits rows", requests.size(), logits.rows,
         dtype_name(logits.dtype));
  }
  std::vector<float> row(static_cast<std::size_t>(logits.cols));
  std::vector<SampledToken> out;
  out.reserve(requests.size());
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const auto* src = static_cast<const char*>(logits.data) + std::int64_t(r) * logits.stride * 4;
    // Tensor views hold device addresses; a host copy goes through the backend's download path.
    HostView view{const_cast<char*>(src), row.size() * sizeof(float)};
    download(view, 0, row.data(), row.size() * sizeof(float));
    out.push_back(sample_token(row, *requests[r].params, requests[r].history, requests[r].output_index));
  }
  return out;
}

void Backend::linear_residual_rms_norm(const Tensor& x, const Tensor& weight, Tensor delta, Tensor residual,
                                       const Tensor& norm_weight, float eps, Tensor out) {
  linear(x, weight, nullptr, delta);
  rms_norm(delta, &residual, norm_weight, eps, out);
}

void Backend::linear_swiglu(const Tensor& x, const Tensor& weight, Tensor gate_up, Tensor out) {
  linear(x, weight, nullptr, gate_up);
  swiglu(gate_up, out);
}

void Backend::rotary_kv_store(KvCache& cache, std::int32_t layer, Tensor q, Tensor k, const Tensor& v,
                              std::int32_t head_dim, const RotaryParams& rope, const QkNormParams* qk_norm) {
  if (qk_norm) {
    head_rms_norm(q, head_dim, qk_norm->q_weight, qk_norm->eps);
    head_rms_norm(k, head_dim, qk_norm->k_weight, qk_norm->eps);
  }
  rotary(q, k, head_dim, rope);
  kv_store(cache, layer, k, v);
}

void Backend::linear_fp8(const Tensor&, const Tensor&, const QuantizedWeight&, const Tensor*, Tensor) {
  fail(ExitCode::failure, "internal: the {} backend keeps no FP8 weights", name());
}

void Backend::geglu(const Tensor&, Tensor) { fail(ExitCode::failure, "internal: the {} backend has no geglu", name()); }

void Backend::soft_cap(Tensor, float) { fail(ExitCode::failure, "internal: the {} backend has no soft_cap", name()); }

void Backend::scale(Tensor, float) { fail(ExitCode::failure, "internal: the {} backend has no scale", name()); }

void Backend::router_topk(const Tensor&, const RouterParams&, Tensor, Tensor) {
  fail(ExitCode::failure, "internal: the {} backend has no router_topk", name());
}

void Backend::moe_experts(const Tensor&, const Tensor&, const Tensor&, const MoeExperts&, const MoeScratch&, Tensor) {
  fail(ExitCode::failure, "internal: the {} backend has no moe_experts", name());
}

std::unique_ptr<StepGraph> Backend::capture(const std::function<void()>&) {
  fail(ExitCode::failure, "internal: the {} backend cannot capture step graphs", name());
}

void Backend::replay(const StepGraph&) {
  fail(ExitCode::failure, "internal: the {} backend cannot replay step graphs", name());
}

KvCache Backend::allocate_kv_cache(const KvCacheLayout& layout) {
  kv_layout_validate(layout);
  KvCache cache;
  cache.layout = layout;
  cache.storage = allocate(layout.size_bytes());
  cache.n_growable_pages = layout.n_pages;
  cache.backed_pages = layout.n_pages;
  return cache;
}

KvCache Backend::reserve_kv_cache(const KvCacheLayout& layout, std::int32_t n_growable_pages) {
  kv_layout_validate(layout);
  if (n_growable_pages < 0 || n_growable_pages > layout.n_pages) {
    fail(ExitCode::failure, "internal: {} growable pages of a KV cache of {}", n_growable_pages, layout.n_pages);
  }
  const std::size_t granule_bytes = commit_granularity_bytes();
  if (granule_bytes == 0) return allocate_kv_cache(layout);
  KvCache cache;
  cache.layout = layout;
  cache.n_growable_pages = n_growable_pages;
  cache.granule_bytes = granule_bytes;
  const KvGranules granules(layout, n_growable_pages, cache.granule_bytes);
  cache.storage = reserve_address_space(granules.reservation_bytes());
  const KvBackingState tail{0, n_growable_pages < layout.n_pages};
  if (!kv_commit(*cache.storage, granules, {}, tail)) {
    fail(ExitCode::capacity, "the device has no memory for the {} KV pages kept from the start ({})",
         layout.n_pages - n_growable_pages, format_bytes(granules.committed_bytes(tail)));
  }
  cache.backed_pages = granules.pages_backed(tail);
  return cache;
}

std::int32_t Backend::kv_grow(KvCache& cache, std::int32_t n_pages_wanted) {
  n_pages_wanted = std::min(n_pages_wanted, cache.n_growable_pages);
  if (n_pages_wanted <= cache.backed_pages || cache.granule_bytes == 0) return cache.backed_pages;
  const KvGranules granules(cache.layout, cache.n_growable_pages, cache.granule_bytes);
  const std::int32_t chunk = granules.chunk_pages(k_kv_chunk_bytes);
  const auto whole_chunks = std::int32_t(
      std::min<std::int64_t>((std::int64_t(n_pages_wanted) + chunk - 1) / chunk * chunk, cache.n_growable_pages));
  const bool tail = cache.n_growable_pages < cache.layout.n_pages;
  const KvBackingState now{cache.backed_pages, tail};
  // A whole chunk; when the device cannot hold one, just the pages wanted.
  std::int32_t target = whole_chunks;
  if (!kv_commit(*cache.storage, granules, now, {target, tail})) {
    target = n_pages_wanted;
    if (target == whole_chunks || !kv_commit(*cache.storage, granules, now, {target, tail})) return cache.backed_pages;
  }
  cache.backed_pages = granules.pages_backed({target, tail});
  return cache.backed_pages;
}

bool Backend::kv_commit(Buffer& storage, const KvGranules& granules, KvBackingState from, KvBackingState to) {
  const std::vector<ByteRange> runs = granules.runs_between(from, to);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (commit(storage, runs[i].offset_bytes, runs[i].size_bytes)) continue;
    while (i-- > 0) decommit(storage, runs[i].offset_bytes, runs[i].size_bytes);  // all or nothing
    return false;
  }
  return true;
}

}  // namespace flare::helios
