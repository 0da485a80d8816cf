// Skinny GEMM for decode and small batches: out[m, n] = x[m, k] @ w[n, k]^T (+ bias[n]) for m <= 16,
// x and w bf16 (row-major, rows strided), bias [n] f32 or null, F32 accumulation, out [m, n] bf16 or
// f32 (row stride out_stride). At such m every weight is read once and feeds at most 16 FMAs, so the
// GEMM is bound by streaming w from HBM; cuBLASLt's tiles leave the small projections well short of
// that bound. This kernel only streams: each thread keeps U x R 16-byte weight loads in flight,
// loads w with ld.global.nc.L1::no_allocate (read once, so it must not evict x from L1), and reads x
// (tiny, read by every block) through L1.
//
// Work split: a block of 4 warps owns (4 / KW) row groups of R consecutive weight rows; the KW warps
// of a group split k in 16-byte chunks (thread j of the group takes chunks j, j + 32 KW, ...), sum
// over the warp with shuffles, then over the group's warps through shared memory. Rows past n repeat
// row n - 1 and rows of x past m repeat row m - 1 (loaded, never stored), so the loop has no row
// guards. The reduction order is fixed: the same problem gives the same bits on every run.
//
// Requires (the host checks): k % 8 == 0; x, w and their row strides 16-byte aligned.
// Entry points flare_skinny_gemm_m<M>_v<V>_<bf16|f32>: M in {1, 2, 4, 8, 16} is the x-row tile (the
// host picks the smallest >= m), V the variant below (skinny_gemm.h keeps the same table);
// grid (ceil(n / rows per block)), block 128.
// Defines: SKINNY_M (optional): compile only that tile's entry points. The host builds one module
// per tile, compiled in parallel: the forty entry points of all tiles take about 15 s in one
// NVRTC program.
#include <cuda_bf16.h>

// Programmatic dependent launch (sm_90+, when the host launches with it): the next kernel may start
// launching once every CTA of this one has triggered, and this one waits for the previous kernel to
// finish (its results, and its reads of what this one overwrites) before it reads x or writes out.
// The weights never change while the model is loaded, so each thread's first weight loads go out
// before the wait and stream while the previous kernel finishes. Both are no-ops for a plain launch.
__device__ __forceinline__ void flare_pdl_trigger() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void flare_pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

constexpr int k_skinny_threads = 128;
constexpr int k_skinny_warps = k_skinny_threads / 32;

// 16 bytes of a streamed weight row: read-only for the kernel's life, never allocated in L1.
__device__ __forceinline__ uint4 flare_skinny_load_w(const __nv_bfloat16* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// The two bf16 of a 32-bit word as floats (element 2i in the low half, 2i + 1 in the high half).
__device__ __forceinline__ float flare_skinny_lo(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float flare_skinny_hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); }

__device__ __forceinline__ float flare_skinny_dot8(const float (&xf)[8], uint4 w, float acc) {
  acc = fmaf(xf[0], flare_skinny_lo(w.x), acc);
  acc = fmaf(xf[1], flare_skinny_hi(w.x), acc);
  acc = fmaf(xf[2], flare_skinny_lo(w.y), acc);
  acc = fmaf(xf[3], flare_skinny_hi(w.y), acc);
  acc = fmaf(xf[4], flare_skinny_lo(w.z), acc);
  acc = fmaf(xf[5], flare_skinny_hi(w.z), acc);
  acc = fmaf(xf[6], flare_skinny_lo(w.w), acc);
  acc = fmaf(xf[7], flare_skinny_hi(w.w), acc);
  return acc;
}

__device__ __forceinline__ void flare_skinny_store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ void flare_skinny_store(float* p, float v) { *p = v; }

// One pass of a thread over U chunks c0, c0 + step, ...: the U x R weight loads first (load_pass),
// so they are all in flight before the first is used, then x's chunks (L1) and the FMAs (use_pass).
// TAIL guards chunks past n_chunks (loaded as zeros, skipped).
template <int R, int U, bool TAIL>
__device__ __forceinline__ void flare_skinny_load_pass(const __nv_bfloat16* const (&w_rows)[R], int c0, int step,
                                                       int n_chunks, uint4 (&wv)[U][R]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = c0 + u * step;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      wv[u][r] = !TAIL || c < n_chunks ? flare_skinny_load_w(w_rows[r] + (long long)c * 8) : make_uint4(0, 0, 0, 0);
    }
  }
}

template <int M, int R, int U, bool TAIL>
__device__ __forceinline__ void flare_skinny_use_pass(const uint4 (&wv)[U][R], const __nv_bfloat16* const (&x_rows)[M],
                                                      int c0, int step, int n_chunks, float (&acc)[M][R]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = c0 + u * step;
    if (TAIL && c >= n_chunks) break;
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const uint4 xv = __ldg(reinterpret_cast<const uint4*>(x_rows[i] + (long long)c * 8));
      const float xf[8] = {flare_skinny_lo(xv.x), flare_skinny_hi(xv.x), flare_skinny_lo(xv.y), flare_skinny_hi(xv.y),
                           flare_skinny_lo(xv.z), flare_skinny_hi(xv.z), flare_skinny_lo(xv.w), flare_skinny_hi(xv.w)};
#pragma unroll
      for (int r = 0; r < R; ++r) acc[i][r] = flare_skinny_dot8(xf, wv[u][r], acc[i][r]);
    }
  }
}

// M: x rows computed (>= m); KW: warps splitting one row group's k; R: weight rows per group;
// U: chunks per row each thread loads before using them.
template <int M, int KW, int R, int U, typename Out>
__device__ __forceinline__ void flare_skinny_gemm(const __nv_bfloat16* __restrict__ x, long long x_stride,
                                                  const __nv_bfloat16* __restrict__ w, long long w_stride,
                                                  const float* __restrict__ bias, Out* __restrict__ out,
                                                  long long out_stride, int m, int n, int k) {
  static_assert(k_skinny_warps % KW == 0, "KW must divide the block's warps");
  constexpr int groups = k_skinny_warps / KW;  // row groups per block
  constexpr int group_threads = KW * 32;      // threads splitting one group's k
  constexpr int values = M * R;               // sums one group produces
  __shared__ float partial[k_skinny_warps][values];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = warp / KW;
  const int part = (warp % KW) * 32 + lane;  // this thread's index among its group's threads
  const long long row0 = ((long long)blockIdx.x * groups + group) * R;
  const int n_chunks = k / 8;

  const __nv_bfloat16* w_rows[R];  // [R] rows of w, each k bf16
#pragma unroll
  for (int r = 0; r < R; ++r) w_rows[r] = w + (row0 + r < n ? row0 + r : (long long)n - 1) * w_stride;
  const __nv_bfloat16* x_rows[M];  // [M] rows of x, each k bf16
#pragma unroll
  for (int i = 0; i < M; ++i) x_rows[i] = x + (long long)(i < m ? i : m - 1) * x_stride;

  float acc[M][R];
#pragma unroll
  for (int i = 0; i < M; ++i) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[i][r] = 0.0f;
  }

  // Full passes (every chunk in range: no guards, so all loads can issue first), then at most one
  // guarded pass over the rest. The first pass's weight loads go out before the wait for the
  // previous kernel.
  int c0 = part;
  uint4 wv[U][R];
  const bool first_full = c0 + (U - 1) * group_threads < n_chunks;
  if (first_full) {
    flare_skinny_load_pass<R, U, false>(w_rows, c0, group_threads, n_chunks, wv);
  } else {
    flare_skinny_load_pass<R, U, true>(w_rows, c0, group_threads, n_chunks, wv);
  }
  flare_pdl_wait();
  if (!first_full) {
    flare_skinny_use_pass<M, R, U, true>(wv, x_rows, c0, group_threads, n_chunks, acc);
  } else {
    flare_skinny_use_pass<M, R, U, false>(wv, x_rows, c0, group_threads, n_chunks, acc);
    for (c0 += group_threads * U; c0 + (U - 1) * group_threads < n_chunks; c0 += group_threads * U) {
      flare_skinny_load_pass<R, U, false>(w_rows, c0, group_threads, n_chunks, wv);
      flare_skinny_use_pass<M, R, U, false>(wv, x_rows, c0, group_threads, n_chunks, acc);
    }
    if (c0 < n_chunks) {
      flare_skinny_load_pass<R, U, true>(w_rows, c0, group_threads, n_chunks, wv);
      flare_skinny_use_pass<M, R, U, true>(wv, x_rows, c0, group_threads, n_chunks, acc);
    }
  }

  // Sum over the warp (every lane ends with the sums), then lane j keeps sums j, j + 32, ... for the
  // group's reduction across its KW warps.
#pragma unroll
  for (int i = 0; i < M; ++i) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) acc[i][r] += __shfl_xor_sync(0xffffffffu, acc[i][r], offset);
      if (lane == (i * R + r) % 32) partial[warp][i * R + r] = acc[i][r];
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < groups * values; t += k_skinny_threads) {
    const int g = t / values, v = t % values;  // v = i * R + r
    const int i = v / R, r = v % R;
    const long long row = ((long long)blockIdx.x * groups + g) * R + r;
    if (i >= m || row >= n) continue;
    float sum = 0.0f;
#pragma unroll
    for (int p = 0; p < KW; ++p) sum += partial[g * KW + p][v];
    if (bias) sum += bias[row];
    flare_skinny_store(out + (long long)i * out_stride + row, sum);
  }
}

// One entry point per (x-row tile, variant, output type). Variants (KW, R, U), rows per block =
// (4 / KW) x R, kept in step with skinny_gemm.h:
//   v0 (4, 1, 4): the block splits one row's k   v1 (4, 2, 4): the block splits two rows' k
//   v2 (1, 1, 8): a warp per row, 4 rows         v3 (1, 2, 4): a warp per two rows, 8 rows
#define FLARE_SKINNY_ENTRY(M, V, KW, R, U, OUT_NAME, OUT)                                                           \
  extern "C" __global__ void __launch_bounds__(k_skinny_threads) flare_skinny_gemm_m##M##_v##V##_##OUT_NAME(         \
      const __nv_bfloat16* x, long long x_stride, const __nv_bfloat16* w, long long w_stride, const float* bias,     \
      OUT* out, long long out_stride, int m, int n, int k) {                                                        \
    flare_pdl_trigger();                                                                                             \
    flare_skinny_gemm<M, KW, R, U, OUT>(x, x_stride, w, w_stride, bias, out, out_stride, m, n, k);                  \
  }

#define FLARE_SKINNY_VARIANTS(M, OUT_NAME, OUT)      \
  FLARE_SKINNY_ENTRY(M, 0, 4, 1, 4, OUT_NAME, OUT) \
  FLARE_SKINNY_ENTRY(M, 1, 4, 2, 4, OUT_NAME, OUT) \
  FLARE_SKINNY_ENTRY(M, 2, 1, 1, 8, OUT_NAME, OUT) \
  FLARE_SKINNY_ENTRY(M, 3, 1, 2, 4, OUT_NAME, OUT)

#define FLARE_SKINNY_TILE(M)                      \
  FLARE_SKINNY_VARIANTS(M, bf16, __nv_bfloat16) \
  FLARE_SKINNY_VARIANTS(M, f32, float)

#ifdef SKINNY_M
#if SKINNY_M != 1 && SKINNY_M != 2 && SKINNY_M != 4 && SKINNY_M != 8 && SKINNY_M != 16
#error "skinny_gemm: SKINNY_M must be 1, 2, 4, 8 or 16"
#endif
FLARE_SKINNY_TILE(SKINNY_M)
#else
FLARE_SKINNY_TILE(1)
FLARE_SKINNY_TILE(2)
FLARE_SKINNY_TILE(4)
FLARE_SKINNY_TILE(8)
FLARE_SKINNY_TILE(16)
#endif
