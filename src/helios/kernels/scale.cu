// In-place elementwise scalings of a matrix [rows, cols] with row stride `stride`, F32 math:
//   flare_scale_bf16 / flare_scale_f32: x *= factor (bf16: rounded once, round to nearest even);
//     Gemma scales its embeddings by sqrt(hidden);
//   flare_soft_cap_f32: x = cap * tanh(x / cap) on f32 logits (Gemma's final logit soft-capping).
// Grid (ceil(cols / FLARE_BLOCK) capped by the host, rows), block FLARE_BLOCK: blockIdx.y is the row,
// x strides over the columns.
// Defines: FLARE_BLOCK (threads per block, at least the host's launch, default 256).
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

#ifndef FLARE_BLOCK
#define FLARE_BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_scale_bf16(__nv_bfloat16* x, long long stride, int cols, float factor) {  // x [rows, cols]
  flare_pdl_enter();
  __nv_bfloat16* row = x + (long long)blockIdx.y * stride;
  for (int c = blockIdx.x * FLARE_BLOCK + threadIdx.x; c < cols; c += gridDim.x * FLARE_BLOCK) {
    row[c] = __float2bfloat16(__bfloat162float(row[c]) * factor);
  }
}

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_scale_f32(float* x, long long stride, int cols, float factor) {  // x [rows, cols]
  flare_pdl_enter();
  float* row = x + (long long)blockIdx.y * stride;
  for (int c = blockIdx.x * FLARE_BLOCK + threadIdx.x; c < cols; c += gridDim.x * FLARE_BLOCK) row[c] *= factor;
}

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_soft_cap_f32(float* x, long long stride, int cols, float cap) {  // x [rows, cols] logits
  flare_pdl_enter();
  float* row = x + (long long)blockIdx.y * stride;
  for (int c = blockIdx.x * FLARE_BLOCK + threadIdx.x; c < cols; c += gridDim.x * FLARE_BLOCK) {
    row[c] = cap * tanhf(row[c] / cap);
  }
}
