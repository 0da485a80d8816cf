// Bias add after a cuBLASLt GEMM whose epilogue cannot add an F32 bias for this output type:
// out[r, c] += bias[c], out [rows, cols] bf16 (flare_bias_add_bf16) or f32 (flare_bias_add_f32),
// bias [cols] f32, F32 math. blockIdx.y is the row; x covers the columns.
// Defines: FLARE_BLOCK (threads per block, default 256).
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
flare_bias_add_bf16(__nv_bfloat16* __restrict__ out, long long out_stride,  // [rows, cols]
                    const float* __restrict__ bias, int cols) {
  flare_pdl_enter();             // [cols]
  __nv_bfloat16* dst = out + (long long)blockIdx.y * out_stride;
  for (int c = blockIdx.x * FLARE_BLOCK + threadIdx.x; c < cols; c += gridDim.x * FLARE_BLOCK) {
    dst[c] = __float2bfloat16(__bfloat162float(dst[c]) + bias[c]);
  }
}

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_bias_add_f32(float* __restrict__ out, long long out_stride,  // [rows, cols]
                   const float* __restrict__ bias, int cols) {
  flare_pdl_enter();     // [cols]
  float* dst = out + (long long)blockIdx.y * out_stride;
  for (int c = blockIdx.x * FLARE_BLOCK + threadIdx.x; c < cols; c += gridDim.x * FLARE_BLOCK) dst[c] += bias[c];
}
