// Row gather: out[i, :] = x[rows[i], :] (bf16), the hidden states of the tokens whose logits a step
// wants. One block per output row. Defines: FLARE_BLOCK (threads per block, default 256).
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
flare_gather_rows(const __nv_bfloat16* __restrict__ x, long long x_stride,  // [n_tokens, cols]
                  const int* __restrict__ rows,                            // [n_out] token index of each row
                  __nv_bfloat16* __restrict__ out, long long out_stride,    // [n_out, cols]
                  int cols) {
  flare_pdl_enter();
  const long long i = blockIdx.x;
  const __nv_bfloat16* src = x + (long long)rows[i] * x_stride;
  __nv_bfloat16* dst = out + i * out_stride;
  for (int c = threadIdx.x; c < cols; c += FLARE_BLOCK) dst[c] = src[c];
}
