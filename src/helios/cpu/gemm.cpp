// BF16-weight GEMM for the CPU backend (see gemm.h). The AVX2 micro-kernel computes a 4x3 tile
// (4 rows of x against 3 weight rows) with 12 vector accumulators, converting BF16 to F32 with a
// 16-bit shift; the column range is cut into blocks of kBlockN weight rows (one cache-resident
// block per task) and the m loop runs inside a block.
#include "helios/cpu/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "helios/dtype.h"

namespace flare::helios::cpu {
namespace {

constexpr std::int64_t kBlockN = 24;

__attribute__((target("avx2,fma"))) inline __m256 load_bf16x8(const std::uint16_t* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
}

__attribute__((target("avx2,fma"))) inline float hsum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) inline __m256 load_w(const std::uint16_t* p) { return load_bf16x8(p); }
__attribute__((target("avx2,fma"))) inline __m256 load_w(const float* p) { return _mm256_loadu_ps(p); }
inline float w_value(std::uint16_t w) { return bf16_to_f32(w); }
inline float w_value(float w) { return w; }

// M rows of x against N weight rows (W: the bf16 weights, or a block of them already widened to
// f32, `w` pointing at weight row j0); results plus bias stored.
template <int M, int N, typename W>
__attribute__((target("avx2,fma"))) void tile(const GemmArgs& a, const W* w, std::int64_t i0, std::int64_t j0) {
  __m256 acc[M][N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) acc[i][j] = _mm256_setzero_ps();
  const float* xr[M];
  for (int i = 0; i < M; ++i) xr[i] = a.x + (i0 + i) * a.x_stride;
  const W* wr[N];
  for (int j = 0; j < N; ++j) wr[j] = w + j * a.k;
  const std::int64_t k8 = a.k & ~std::int64_t(7);
  for (std::int64_t p = 0; p < k8; p += 8) {
    __m256 wv[N];
    for (int j = 0; j < N; ++j) wv[j] = load_w(wr[j] + p);
    for (int i = 0; i < M; ++i) {
      const __m256 xv = _mm256_loadu_ps(xr[i] + p);
      for (int j = 0; j < N; ++j) acc[i][j] = _mm256_fmadd_ps(xv, wv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      float sum = hsum(acc[i][j]);
      for (std::int64_t p = k8; p < a.k; ++p) sum += xr[i][p] * w_value(wr[j][p]);
      if (a.bias) sum += a.bias[j0 + j];
      a.out[(i0 + i) * a.out_stride + j0 + j] = sum;
    }
  }
}

// `w` holds weight rows j0..j1 (row stride a.k).
template <int M, typename W>
__attribute__((target("avx2,fma"))) void row_tile(const GemmArgs& a, const W* w, std::int64_t i0, std::int64_t j0,
                                                  std::int64_t j1) {
  std::int64_t j = j0;
  for (; j + 3 <= j1; j += 3) tile<M, 3>(a, w + (j - j0) * a.k, i0, j);
  if (j + 2 == j1) tile<M, 2>(a, w + (j - j0) * a.k, i0, j);
  if (j + 1 == j1) tile<M, 1>(a, w + (j - j0) * a.k, i0, j);
}

template <typename W>
__attribute__((target("avx2,fma"))) void rows_avx2(const GemmArgs& a, const W* w, std::int64_t j0, std::int64_t j1) {
  std::int64_t i = 0;
  for (; i + 4 <= a.m; i += 4) row_tile<4>(a, w, i, j0, j1);
  switch (a.m - i) {
    case 3: row_tile<3>(a, w, i, j0, j1); break;
    case 2: row_tile<2>(a, w, i, j0, j1); break;
    case 1: row_tile<1>(a, w, i, j0, j1); break;
    default: break;
  }
}

// Small m (decode): read the BF16 rows directly, the product is bound by reading them. Larger m:
// widen the block to F32 once (`panel`, kBlockN x k) so the m/4 tiles load it without converting.
__attribute__((target("avx2,fma"))) void block_avx2(const GemmArgs& a, std::int64_t j0, std::int64_t j1,
                                                    std::vector<float>& panel) {
  const std::uint16_t* w = a.w + j0 * a.k;
  if (a.m < 8) return rows_avx2(a, w, j0, j1);
  panel.resize(std::size_t((j1 - j0) * a.k));
  const std::int64_t n = (j1 - j0) * a.k;
  std::int64_t p = 0;
  for (; p + 8 <= n; p += 8) _mm256_storeu_ps(panel.data() + p, load_bf16x8(w + p));
  for (; p < n; ++p) panel[std::size_t(p)] = bf16_to_f32(w[p]);
  rows_avx2(a, panel.data(), j0, j1);
}

}  // namespace

bool gemm_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

void gemm_bf16_scalar(const GemmArgs& a, std::int64_t n_begin, std::int64_t n_end) {
  for (std::int64_t i = 0; i < a.m; ++i) {
    const float* xr = a.x + i * a.x_stride;
    for (std::int64_t j = n_begin; j < n_end; ++j) {
      const std::uint16_t* wr = a.w + j * a.k;
      float sum = 0.0f;
      for (std::int64_t p = 0; p < a.k; ++p) sum += xr[p] * bf16_to_f32(wr[p]);
      a.out[i * a.out_stride + j] = sum + (a.bias ? a.bias[j] : 0.0f);
    }
  }
}

void gemm_bf16(ThreadPool& pool, const GemmArgs& a) {
  const std::int64_t n_blocks = (a.n + kBlockN - 1) / kBlockN;
  const bool avx2 = gemm_has_avx2();
  pool.parallel_for(n_blocks, [&](std::int64_t b0, std::int64_t b1) {
    std::vector<float> panel;
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t j0 = b * kBlockN;
      const std::int64_t j1 = std::min(a.n, j0 + kBlockN);
      if (avx2) {
        block_avx2(a, j0, j1, panel);
      } else {
        gemm_bf16_scalar(a, j0, j1);
      }
    }
  });
}

}  // namespace flare::helios::cpu
