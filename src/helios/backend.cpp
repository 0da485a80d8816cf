// Backend-independent pieces of the interface: tensor views and KV cache sizing.
#include "helios/backend.h"

#include "common/error.h"

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

}  // namespace

Tensor Tensor::of(const Buffer& buffer, DType dtype, std::int64_t rows, std::int64_t cols) {
  if (std::size_t(rows * cols) * dtype_size_bytes(dtype) > buffer.size_bytes()) {
    fail(ExitCode::failure, "internal: tensor [{}, {}] {} exceeds its buffer of {} bytes", rows, cols,
         dtype_name(dtype), buffer.size_bytes());
  }
  return Tensor{buffer.data(), dtype, rows, cols, cols};
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

std::unique_ptr<StepGraph> Backend::capture(const std::function<void()>&) {
  fail(ExitCode::failure, "internal: the {} backend cannot capture step graphs", name());
}

void Backend::replay(const StepGraph&) {
  fail(ExitCode::failure, "internal: the {} backend cannot replay step graphs", name());
}

KvCache Backend::allocate_kv_cache(const KvCacheLayout& layout) {
  if (layout.n_pages < 1 || layout.page_size_tokens < 1 || layout.n_layers < 1) {
    fail_usage("KV cache needs at least one page, one token per page and one layer");
  }
  if (layout.dtype != DType::bf16 && layout.dtype != DType::f8_e4m3 && layout.dtype != DType::f32) {
    fail_usage("KV cache dtype {} is not supported (bf16, f8_e4m3, f32)", dtype_name(layout.dtype));
  }
  KvCache cache;
  cache.layout = layout;
  cache.storage = allocate(layout.size_bytes());
  return cache;
}

}  // namespace flare::helios
