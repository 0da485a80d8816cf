// RMSNorm fused with the residual add, BF16 in and out, F32 accumulation. One block per row:
//   with residual:    residual = bf16(residual + x);  out = bf16(weight * (residual * inv))
//   without residual: out = bf16(weight * (x * inv)),  inv = 1 / sqrt(mean(v^2) + eps)
// The residual stream is rounded to BF16 before the norm reads it, as HF transformers does in BF16.
// out may alias x (each thread reads its own elements before writing them).
// Defines: FLARE_BLOCK (threads per block, a multiple of 32, default 256).
#include <cuda_bf16.h>

#ifndef FLARE_BLOCK
#define FLARE_BLOCK 256
#endif

__device__ __forceinline__ float flare_warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The sum of v over the block, returned to every thread.
__device__ __forceinline__ float flare_block_sum(float v) {
  __shared__ float partial[FLARE_BLOCK / 32];
  v = flare_warp_sum(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < FLARE_BLOCK / 32; ++w) total += partial[w];
  return total;
}

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_rms_norm(const __nv_bfloat16* x, long long x_stride,    // [rows, cols]
               __nv_bfloat16* residual, long long residual_stride,  // [rows, cols] or null
               const float* __restrict__ weight,              // [cols] f32
               float eps,
               __nv_bfloat16* out, long long out_stride,      // [rows, cols]
               int cols) {
  const long long row = blockIdx.x;
  const __nv_bfloat16* xr = x + row * x_stride;
  __nv_bfloat16* rr = residual ? residual + row * residual_stride : nullptr;
  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += FLARE_BLOCK) {
    float v = __bfloat162float(xr[c]);
    if (rr) {
      const __nv_bfloat16 r = __float2bfloat16(__bfloat162float(rr[c]) + v);
      rr[c] = r;
      v = __bfloat162float(r);
    }
    sum += v * v;
  }
  const float inv = 1.0f / sqrtf(flare_block_sum(sum) / float(cols) + eps);
  const __nv_bfloat16* src = rr ? rr : xr;
  __nv_bfloat16* dst = out + row * out_stride;
  for (int c = threadIdx.x; c < cols; c += FLARE_BLOCK) {
    dst[c] = __float2bfloat16(weight[c] * (__bfloat162float(src[c]) * inv));
  }
}
