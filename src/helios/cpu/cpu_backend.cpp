// CPU backend operations other than attention (see cpu_backend.h).
#include "helios/cpu/cpu_backend.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "helios/cpu/activation.h"
#include "helios/cpu/gemm.h"

namespace flare::helios::cpu {
namespace {

class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(std::size_t size_bytes) : size_(size_bytes) {
    const std::size_t rounded = (std::max<std::size_t>(size_bytes, 1) + 63) / 64 * 64;
    data_ = std::aligned_alloc(64, rounded);
    if (!data_) fail(ExitCode::capacity, "out of host memory allocating {} bytes", size_bytes);
    std::memset(data_, 0, rounded);
  }
  ~HostBuffer() override { std::free(data_); }
  void* data() const override { return data_; }
  std::size_t size_bytes() const override { return size_; }

 private:
  void* data_;
  std::size_t size_;
};

void expect_dtype(const Tensor& t, DType dtype, const char* what) {
  if (t.dtype != dtype) {
    fail(ExitCode::failure, "internal: cpu {} expects {} but got {}", what, dtype_name(dtype), dtype_name(t.dtype));
  }
}

float* row_f32(const Tensor& t, std::int64_t row) { return static_cast<float*>(t.data) + row * t.stride; }

}  // namespace

CpuBackend::CpuBackend(int n_threads) : pool_(n_threads) {}

std::unique_ptr<Buffer> CpuBackend::allocate(std::size_t size_bytes) { return std::make_unique<HostBuffer>(size_bytes); }

void CpuBackend::emulate_kv_commits(std::size_t granule_bytes, std::size_t limit_bytes) {
  if (granule_bytes == 0) fail(ExitCode::failure, "internal: emulated commits in granules of 0 bytes");
  emulate_commits_ = true;
  granule_bytes_ = granule_bytes;
  commit_limit_bytes_ = limit_bytes;
}

std::unique_ptr<Buffer> CpuBackend::reserve_address_space(std::size_t size_bytes) {
  auto buffer = allocate(size_bytes);
  if (emulate_commits_) std::memset(buffer->data(), 0xff, size_bytes);
  return buffer;
}

bool CpuBackend::commit(Buffer& reserved, std::size_t offset, std::size_t size) {
  if (!emulate_commits_) return true;
  if (offset % granule_bytes_ != 0 || size % granule_bytes_ != 0 || offset + size > reserved.size_bytes()) {
    fail(ExitCode::failure, "internal: commit of [{}, +{}) in granules of {}", offset, size, granule_bytes_);
  }
  if (commit_limit_bytes_ > 0 && committed_bytes_ + size > commit_limit_bytes_) return false;
  std::memset(static_cast<char*>(reserved.data()) + offset, 0, size);
  committed_bytes_ += size;
  return true;
}

void CpuBackend::decommit(Buffer& reserved, std::size_t offset, std::size_t size) {
  if (!emulate_commits_) return;
  std::memset(static_cast<char*>(reserved.data()) + offset, 0xff, size);
  committed_bytes_ -= size;
}

void CpuBackend::upload(Buffer& dst, std::size_t offset, const void* src, std::size_t size) {
  if (offset > dst.size_bytes() || size > dst.size_bytes() - offset) fail(ExitCode::failure, "internal: upload out of bounds");
  std::memcpy(static_cast<char*>(dst.data()) + offset, src, size);
}

void CpuBackend::download(const Buffer& src, std::size_t offset, void* dst, std::size_t size) {
  if (offset > src.size_bytes() || size > src.size_bytes() - offset) fail(ExitCode::failure, "internal: download out of bounds");
  std::memcpy(dst, static_cast<const char*>(src.data()) + offset, size);
}

void CpuBackend::kv_copy_pages(KvCache& cache, std::span<const PageCopy> copies) {
  const KvCacheLayout& l = cache.layout;
  char* base = static_cast<char*>(cache.storage->data());
  const std::size_t page_bytes = l.page_bytes();
  for (std::int32_t layer = 0; layer < l.n_layers; ++layer) {
    char* layer_base = base + std::size_t(layer) * std::size_t(l.n_pages) * page_bytes;
    for (const PageCopy& c : copies) {
      std::memcpy(layer_base + std::size_t(c.dst_page) * page_bytes, layer_base + std::size_t(c.src_page) * page_bytes,
                  page_bytes);
    }
  }
}

void CpuBackend::begin_step(const Step& step, std::span<const KvCache* const> caches) {
  std::vector<std::int32_t> n_pages;
  for (const KvCache* cache : caches) n_pages.push_back(cache->layout.n_pages);
  step_validate(step, n_pages, caches.front()->layout.page_size_tokens);
  ctx_.step = step;
  ctx_.token_row.clear();
  ctx_.token_position.clear();
  ctx_.logit_tokens.clear();
  std::int32_t t = 0;
  for (std::int32_t r = 0; r < step.n_rows(); ++r) {
    const StepRow& row = step.rows[std::size_t(r)];
    for (std::int32_t i = 0; i < row.n_tokens; ++i) {
      ctx_.token_row.push_back(r);
      ctx_.token_position.push_back(row.start_position + i);
      if (i >= row.n_tokens - row.n_logits) ctx_.logit_tokens.push_back(t + i);
    }
    t += row.n_tokens;
  }
}

void CpuBackend::embedding(const Tensor& table, Tensor out) {
  expect_dtype(table, DType::bf16, "embedding table");
  const auto& tokens = ctx_.step.tokens;
  for (const std::int32_t token : tokens) {
    if (token < 0 || token >= table.rows) fail_input("token id {} outside the vocabulary 0..{}", token, table.rows - 1);
  }
  pool_.parallel_for(std::int64_t(tokens.size()), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const auto* src = static_cast<const std::uint16_t*>(table.data) + tokens[std::size_t(t)] * table.stride;
      float* dst = row_f32(out, t);
      for (std::int64_t c = 0; c < table.cols; ++c) dst[c] = bf16_to_f32(src[c]);
    }
  });
}

void CpuBackend::rms_norm(const Tensor& x, Tensor* residual, const Tensor& weight, float eps, Tensor out) {
  expect_dtype(weight, DType::f32, "rms_norm weight");
  const float* w = static_cast<const float*>(weight.data);
  pool_.parallel_for(x.rows, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const float* src = row_f32(x, t);
      if (residual) {
        float* res = row_f32(*residual, t);
        for (std::int64_t c = 0; c < x.cols; ++c) res[c] += src[c];
        src = res;
      }
      double sum = 0.0;
      for (std::int64_t c = 0; c < x.cols; ++c) sum += double(src[c]) * src[c];
      const float inv = 1.0f / std::sqrt(float(sum / double(x.cols)) + eps);
      float* dst = row_f32(out, t);
      for (std::int64_t c = 0; c < x.cols; ++c) dst[c] = w[c] * (src[c] * inv);
    }
  });
}

void CpuBackend::head_rms_norm(Tensor x, std::int32_t head_dim, const Tensor& weight, float eps) {
  const float* w = static_cast<const float*>(weight.data);
  const std::int64_t n_heads = x.cols / head_dim;
  pool_.parallel_for(x.rows, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      for (std::int64_t h = 0; h < n_heads; ++h) {
        float* v = row_f32(x, t) + h * head_dim;
        double sum = 0.0;
        for (std::int32_t c = 0; c < head_dim; ++c) sum += double(v[c]) * v[c];
        const float inv = 1.0f / std::sqrt(float(sum / head_dim) + eps);
        for (std::int32_t c = 0; c < head_dim; ++c) v[c] = w[c] * (v[c] * inv);
      }
    }
  });
}

void CpuBackend::linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor out) {
  expect_dtype(weight, DType::bf16, "linear weight");
  if (x.cols != weight.cols || out.cols != weight.rows || out.rows != x.rows) {
    fail(ExitCode::failure, "internal: linear shapes [{}, {}] x [{}, {}]^T -> [{}, {}]", x.rows, x.cols, weight.rows,
         weight.cols, out.rows, out.cols);
  }
  GemmArgs args;
  args.x = static_cast<const float*>(x.data);
  args.x_stride = x.stride;
  args.w = static_cast<const std::uint16_t*>(weight.data);
  args.bias = bias ? static_cast<const float*>(bias->data) : nullptr;
  args.out = static_cast<float*>(out.data);
  args.out_stride = out.stride;
  args.m = x.rows;
  args.n = weight.rows;
  args.k = weight.cols;
  gemm_bf16(pool_, args);
}

void CpuBackend::rotary(Tensor q, Tensor k, std::int32_t head_dim, const RotaryParams& rope) {
  const std::int64_t half = rope.inv_freq.cols;
  if (2 * half > head_dim) fail(ExitCode::failure, "internal: rotary dim {} > head dim {}", 2 * half, head_dim);
  pool_.parallel_for(q.rows, [&](std::int64_t b, std::int64_t e) {
    const auto n_half = static_cast<std::size_t>(half);
    std::vector<float> cos_v(n_half), sin_v(n_half);
    for (std::int64_t t = b; t < e; ++t) {
      const std::int64_t freq_row = rope.inv_freq.rows == 1 ? 0 : ctx_.token_row[std::size_t(t)];
      const float* inv_freq = row_f32(rope.inv_freq, freq_row);
      const float position = float(ctx_.token_position[std::size_t(t)]);
      for (std::int64_t i = 0; i < half; ++i) {
        const float angle = position * inv_freq[i];  // F32 product, as the reference computes it
        cos_v[std::size_t(i)] = float(std::cos(double(angle))) * rope.attention_factor;
        sin_v[std::size_t(i)] = float(std::sin(double(angle))) * rope.attention_factor;
      }
      for (Tensor* x : {&q, &k}) {
        for (std::int64_t h = 0; h < x->cols / head_dim; ++h) {
          float* v = row_f32(*x, t) + h * head_dim;
          for (std::int64_t i = 0; i < half; ++i) {
            const float x1 = v[i], x2 = v[i + half];
            v[i] = x1 * cos_v[std::size_t(i)] - x2 * sin_v[std::size_t(i)];
            v[i + half] = x2 * cos_v[std::size_t(i)] + x1 * sin_v[std::size_t(i)];
          }
        }
      }
    }
  });
}

void CpuBackend::kv_store(KvCache& cache, std::int32_t layer, const Tensor& k, const Tensor& v) {
  cpu_kv_store(pool_, ctx_, cache, layer, k, v);
}

void CpuBackend::attention(const KvCache& cache, const Tensor& q, const AttentionParams& params, Tensor out) {
  cpu_attention(pool_, ctx_, cache, q, params, out);
}

void CpuBackend::swiglu(const Tensor& gate_up, Tensor out) {
  const std::int64_t inter = out.cols;
  pool_.parallel_for(gate_up.rows, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const float* g = row_f32(gate_up, t);
      const float* u = g + inter;
      float* dst = row_f32(out, t);
      for (std::int64_t c = 0; c < inter; ++c) dst[c] = silu(g[c]) * u[c];
    }
  });
}

void CpuBackend::geglu(const Tensor& gate_up, Tensor out) {
  expect_dtype(gate_up, DType::f32, "geglu input");
  expect_dtype(out, DType::f32, "geglu output");
  if (gate_up.rows != out.rows || gate_up.cols != 2 * out.cols) {
    fail(ExitCode::failure, "internal: cpu geglu of [{}, {}] into [{}, {}]", gate_up.rows, gate_up.cols, out.rows,
         out.cols);
  }
  const std::int64_t inter = out.cols;
  pool_.parallel_for(gate_up.rows, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const float* g = row_f32(gate_up, t);
      const float* u = g + inter;
      float* dst = row_f32(out, t);
      for (std::int64_t c = 0; c < inter; ++c) dst[c] = gelu_tanh(g[c]) * u[c];
    }
  });
}

void CpuBackend::soft_cap(Tensor x, float cap) {
  expect_dtype(x, DType::f32, "soft_cap input");
  if (!(cap > 0.0f)) fail(ExitCode::failure, "internal: soft cap {}", cap);
  pool_.parallel_for(x.rows, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      float* v = row_f32(x, t);
      for (std::int64_t c = 0; c < x.cols; ++c) v[c] = cap * std::tanh(v[c] / cap);
    }
  });
}

void CpuBackend::scale(Tensor x, float factor) {
  expect_dtype(x, DType::f32, "scale input");
  pool_.parallel_for(x.rows, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      float* v = row_f32(x, t);
      for (std::int64_t c = 0; c < x.cols; ++c) v[c] *= factor;
    }
  });
}

void CpuBackend::gather_logit_rows(const Tensor& x, Tensor out) {
  for (std::size_t i = 0; i < ctx_.logit_tokens.size(); ++i) {
    std::memcpy(row_f32(out, std::int64_t(i)), row_f32(x, ctx_.logit_tokens[i]), std::size_t(x.cols) * sizeof(float));
  }
}

}  // namespace flare::helios::cpu
