// Linear layer: out = x @ w^T (+ bias), x [m, k] bf16, w [n, k] bf16 (row-major, the checkpoint's
// layout), bias [n] f32 or null, F32 accumulation; out [m, n] bf16 (flare_linear_bf16) or f32
// (flare_linear_f32, the logits). A plain shared-memory tiled GEMM: each 256-thread block computes a
// 64 x 64 output tile over 32-wide k slices, each thread a 4 x 4 sub-tile. Correct for any shape and
// stride; not tuned (a faster variant replaces it without changing the contract).
// Defines: none.
#include <cuda_bf16.h>

// Programmatic dependent launch (sm_90+, when the host launches with it: DependentLaunch::all): the next
// kernel may start launching once every CTA of this one has started, and this one waits for the
// previous kernel to finish (its results, and its reads of what this one overwrites) before
// touching global memory. Both are no-ops for a plain launch.
__device__ __forceinline__ void flare_pdl_enter() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

constexpr int k_tile_m = 64;
constexpr int k_tile_n = 64;
constexpr int k_tile_k = 32;
constexpr int k_threads = 256;

__device__ __forceinline__ void flare_store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ void flare_store(float* p, float v) { *p = v; }

template <typename Out>
__device__ __forceinline__ void flare_linear_tile(const __nv_bfloat16* __restrict__ x, long long x_stride,
                                                  const __nv_bfloat16* __restrict__ w, long long w_stride,
                                                  const float* __restrict__ bias, Out* __restrict__ out,
                                                  long long out_stride, int m, int n, int k) {
  __shared__ float xs[k_tile_k][k_tile_m + 1];  // [k, m] slice of x, transposed
  __shared__ float ws[k_tile_k][k_tile_n + 1];  // [k, n] slice of w, transposed
  const int tid = threadIdx.x;
  const int ty = tid / 16, tx = tid % 16;
  const long long m0 = (long long)blockIdx.y * k_tile_m;
  const long long n0 = (long long)blockIdx.x * k_tile_n;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < k; k0 += k_tile_k) {
    for (int e = tid; e < k_tile_m * k_tile_k; e += k_threads) {
      const int r = e / k_tile_k, c = e % k_tile_k;
      const long long gr = m0 + r;
      const int gc = k0 + c;
      xs[c][r] = (gr < m && gc < k) ? __bfloat162float(x[gr * x_stride + gc]) : 0.0f;
      const long long gn = n0 + r;
      ws[c][r] = (gn < n && gc < k) ? __bfloat162float(w[gn * w_stride + gc]) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < k_tile_k; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = xs[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = ws[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const long long r = m0 + ty + 16 * i;
    if (r >= m) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const long long c = n0 + tx + 16 * j;
      if (c < n) flare_store(out + r * out_stride + c, acc[i][j] + (bias ? bias[c] : 0.0f));
    }
  }
}

// grid (ceil(n / 64), ceil(m / 64)), block 256.
extern "C" __global__ void __launch_bounds__(k_threads)
flare_linear_bf16(const __nv_bfloat16* x, long long x_stride, const __nv_bfloat16* w, long long w_stride,
                  const float* bias, __nv_bfloat16* out, long long out_stride, int m, int n, int k) {
  flare_pdl_enter();
  flare_linear_tile(x, x_stride, w, w_stride, bias, out, out_stride, m, n, k);
}

extern "C" __global__ void __launch_bounds__(k_threads)
flare_linear_f32(const __nv_bfloat16* x, long long x_stride, const __nv_bfloat16* w, long long w_stride,
                 const float* bias, float* out, long long out_stride, int m, int n, int k) {
  flare_pdl_enter();
  flare_linear_tile(x, x_stride, w, w_stride, bias, out, out_stride, m, n, k);
}
