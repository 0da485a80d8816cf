// Paged attention on the CPU: KV stores into pages and causal (optionally sliding-window)
// attention with GQA, one online-softmax pass per (token, head), threaded over tokens x heads.
// KV elements are converted from the page dtype (BF16, FP8 E4M3 or F32) as they are read.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "helios/cpu/cpu_backend.h"

namespace flare::helios::cpu {
namespace {

constexpr std::int64_t kBlockTokens = 8;  // query tokens sharing one pass over the K/V rows

struct PageAddress {
  const KvCacheLayout& l;
  char* base;
  std::size_t element_bytes() const { return dtype_size_bytes(l.dtype); }
  // Byte address of K (which=0) or V (which=1) for one layer, page, slot and kv head.
  char* at(std::int32_t layer, std::int32_t page, std::int32_t which, std::int32_t slot, std::int32_t head) const {
    const std::size_t page_bytes = l.page_bytes();
    const std::size_t half = std::size_t(l.page_size_tokens) * std::size_t(l.n_kv_heads) * std::size_t(l.head_dim);
    const std::size_t element = std::size_t(which) * half +
                                (std::size_t(slot) * std::size_t(l.n_kv_heads) + std::size_t(head)) * std::size_t(l.head_dim);
    return base + (std::size_t(layer) * std::size_t(l.n_pages) + std::size_t(page)) * page_bytes + element * element_bytes();
  }
};

bool has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, std::int32_t n) {
  __m256 acc = _mm256_setzero_ps();
  std::int32_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  float sum = _mm_cvtss_f32(s);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// y = y * scale + w * x
__attribute__((target("avx2,fma"))) void scale_axpy_avx2(float scale, float w, const float* x, float* y, std::int32_t n) {
  const __m256 sv = _mm256_set1_ps(scale), wv = _mm256_set1_ps(w);
  std::int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + i), _mm256_mul_ps(sv, _mm256_loadu_ps(y + i))));
  }
  for (; i < n; ++i) y[i] = y[i] * scale + w * x[i];
}

__attribute__((target("avx2,fma"))) void bf16_to_f32_avx2(const std::uint16_t* src, float* dst, std::int32_t n) {
  std::int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16)));
  }
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

float dot(const float* a, const float* b, std::int32_t n) {
  if (has_avx2()) return dot_avx2(a, b, n);
  float sum = 0.0f;
  for (std::int32_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void scale_axpy(float scale, float w, const float* x, float* y, std::int32_t n) {
  if (has_avx2()) return scale_axpy_avx2(scale, w, x, y, n);
  for (std::int32_t i = 0; i < n; ++i) y[i] = y[i] * scale + w * x[i];
}

void store_row(DType dtype, const float* src, char* dst, std::int32_t n) {
  switch (dtype) {
    case DType::f32: std::copy(src, src + n, reinterpret_cast<float*>(dst)); break;
    case DType::bf16:
      for (std::int32_t i = 0; i < n; ++i) reinterpret_cast<std::uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
      break;
    case DType::f8_e4m3:
      for (std::int32_t i = 0; i < n; ++i) reinterpret_cast<std::uint8_t*>(dst)[i] = f32_to_f8_e4m3(src[i]);
      break;
    default: fail(ExitCode::failure, "internal: KV dtype {}", dtype_name(dtype));
  }
}

void load_row(DType dtype, const char* src, float* dst, std::int32_t n) {
  switch (dtype) {
    case DType::f32: std::copy_n(reinterpret_cast<const float*>(src), n, dst); break;
    case DType::bf16:
      if (has_avx2()) {
        bf16_to_f32_avx2(reinterpret_cast<const std::uint16_t*>(src), dst, n);
      } else {
        for (std::int32_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(reinterpret_cast<const std::uint16_t*>(src)[i]);
      }
      break;
    case DType::f8_e4m3:
      for (std::int32_t i = 0; i < n; ++i) dst[i] = f8_e4m3_to_f32(reinterpret_cast<const std::uint8_t*>(src)[i]);
      break;
    default: fail(ExitCode::failure, "internal: KV dtype {}", dtype_name(dtype));
  }
}

// The page of `position` of the step's row in the cache's history group (Step::table).
std::int32_t page_of(const StepContext& ctx, const KvCache& cache, std::int32_t row, std::int32_t position) {
  const StepRow& r = ctx.step.rows[std::size_t(row)];
  return ctx.step.table(cache.group)[std::size_t(r.first_block + position / cache.layout.page_size_tokens)];
}

}  // namespace

void cpu_kv_store(ThreadPool& pool, const StepContext& ctx, KvCache& cache, std::int32_t layer, const Tensor& k,
                  const Tensor& v) {
  const KvCacheLayout& l = cache.layout;
  if (k.cols != std::int64_t(l.n_kv_heads) * l.head_dim) fail(ExitCode::failure, "internal: kv_store width {}", k.cols);
  PageAddress address{l, static_cast<char*>(cache.storage->data())};
  pool.parallel_for(k.rows, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      const std::int32_t row = ctx.token_row[std::size_t(t)];
      const std::int32_t position = ctx.token_position[std::size_t(t)];
      const std::int32_t page = page_of(ctx, cache, row, position);
      const std::int32_t slot = position % l.page_size_tokens;
      for (std::int32_t h = 0; h < l.n_kv_heads; ++h) {
        const float* ks = static_cast<const float*>(k.data) + t * k.stride + h * l.head_dim;
        const float* vs = static_cast<const float*>(v.data) + t * v.stride + h * l.head_dim;
        store_row(l.dtype, ks, address.at(layer, page, 0, slot, h), l.head_dim);
        store_row(l.dtype, vs, address.at(layer, page, 1, slot, h), l.head_dim);
      }
    }
  });
}

void cpu_attention(ThreadPool& pool, const StepContext& ctx, const KvCache& cache, const Tensor& q,
                   const AttentionParams& p, Tensor out) {
  const KvCacheLayout& l = cache.layout;
  if (p.n_kv_heads != l.n_kv_heads || p.head_dim != l.head_dim || p.n_heads % p.n_kv_heads != 0) {
    fail(ExitCode::failure, "internal: attention heads {}/{} x {} against cache {} x {}", p.n_heads, p.n_kv_heads,
         p.head_dim, l.n_kv_heads, l.head_dim);
  }
  const std::int32_t group = p.n_heads / p.n_kv_heads;
  const std::int32_t d = p.head_dim;
  PageAddress address{l, static_cast<char*>(cache.storage->data())};
  // Work items: (block of up to kBlockTokens consecutive tokens of one row) x query head. The tokens
  // of a block share each K/V row conversion; each keeps its own causal / window limit.
  std::vector<std::pair<std::int64_t, std::int64_t>> blocks;  // [token begin, token end)
  for (std::int64_t t = 0; t < q.rows;) {
    std::int64_t end = t + 1;
    while (end < q.rows && end - t < kBlockTokens && ctx.token_row[std::size_t(end)] == ctx.token_row[std::size_t(t)]) ++end;
    blocks.emplace_back(t, end);
    t = end;
  }
  pool.parallel_for(std::int64_t(blocks.size()) * p.n_heads, [&](std::int64_t b, std::int64_t e) {
    const auto n_d = static_cast<std::size_t>(d);
    std::vector<float> kbuf(n_d), vbuf(n_d), acc(n_d * kBlockTokens);
    float max_score[kBlockTokens];
    double denominator[kBlockTokens];
    for (std::int64_t item = b; item < e; ++item) {
      const auto [t0, t1] = blocks[std::size_t(item / p.n_heads)];
      const std::int32_t h = std::int32_t(item % p.n_heads);
      const std::int32_t kv_head = h / group;
      const std::int32_t row = ctx.token_row[std::size_t(t0)];
      const std::int32_t last = ctx.token_position[std::size_t(t1 - 1)];
      const std::int32_t p0 = ctx.token_position[std::size_t(t0)];
      const std::int32_t first = p.sliding_window > 0 ? std::max(0, p0 - p.sliding_window + 1) : 0;
      std::fill(acc.begin(), acc.end(), 0.0f);
      std::fill(max_score, max_score + kBlockTokens, -std::numeric_limits<float>::infinity());
      std::fill(denominator, denominator + kBlockTokens, 0.0);
      for (std::int32_t j = first; j <= last; ++j) {
        const std::int32_t page = page_of(ctx, cache, row, j);
        const std::int32_t slot = j % l.page_size_tokens;
        load_row(l.dtype, address.at(p.layer, page, 0, slot, kv_head), kbuf.data(), d);
        load_row(l.dtype, address.at(p.layer, page, 1, slot, kv_head), vbuf.data(), d);
        for (std::int64_t t = t0; t < t1; ++t) {
          const std::int32_t position = ctx.token_position[std::size_t(t)];
          if (j > position || (p.sliding_window > 0 && j < position - p.sliding_window + 1)) continue;
          const std::size_t i = std::size_t(t - t0);
          const float* qv = static_cast<const float*>(q.data) + t * q.stride + std::int64_t(h) * d;
          const float score = dot(qv, kbuf.data(), d) * p.scale;
          float correction = 1.0f;
          if (score > max_score[i]) {  // rescale what was accumulated under the old maximum
            correction = std::exp(max_score[i] - score);
            denominator[i] *= correction;
            max_score[i] = score;
          }
          const float weight = std::exp(score - max_score[i]);
          denominator[i] += weight;
          scale_axpy(correction, weight, vbuf.data(), acc.data() + i * n_d, d);
        }
      }
      for (std::int64_t t = t0; t < t1; ++t) {
        const std::size_t i = std::size_t(t - t0);
        float* dst = static_cast<float*>(out.data) + t * out.stride + std::int64_t(h) * d;
        if (!p.sinks.empty()) {  // the sink joins the denominator (under the larger maximum) and adds no value
          const float sink = static_cast<const float*>(p.sinks.data)[h];
          if (sink > max_score[i]) {
            const float correction = std::exp(max_score[i] - sink);
            denominator[i] *= correction;
            for (std::size_t c = 0; c < n_d; ++c) acc[i * n_d + c] *= correction;
            max_score[i] = sink;
          }
          denominator[i] += std::exp(sink - max_score[i]);
        }
        const float inv = float(1.0 / denominator[i]);
        for (std::int32_t c = 0; c < d; ++c) dst[c] = acc[i * n_d + std::size_t(c)] * inv;
      }
    }
  });
}

}  // namespace flare::helios::cpu
