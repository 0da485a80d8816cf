// Embedding gather: out[t, :] = table[tokens[t], :] (bf16). One block per token; 16-byte copies
// when the row starts and the width allow, element copies otherwise. A token outside the table
// (the host validates tokens first) writes zeros rather than reading out of bounds.
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
flare_embedding(const __nv_bfloat16* __restrict__ table,  // [vocab, cols] row stride table_stride
                long long table_stride, int vocab,
                const int* __restrict__ tokens,            // [n_tokens]
                __nv_bfloat16* __restrict__ out,           // [n_tokens, cols] row stride out_stride
                long long out_stride, int cols) {
  flare_pdl_enter();
  const long long t = blockIdx.x;
  const int token = tokens[t];
  __nv_bfloat16* dst = out + t * out_stride;
  if (token < 0 || token >= vocab) {
    for (int c = threadIdx.x; c < cols; c += FLARE_BLOCK) dst[c] = __float2bfloat16(0.0f);
    return;
  }
  const __nv_bfloat16* src = table + (long long)token * table_stride;
  const bool vector_ok = ((reinterpret_cast<unsigned long long>(src) | reinterpret_cast<unsigned long long>(dst)) & 15) == 0 &&
                         (cols & 7) == 0;
  if (vector_ok) {
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (int c = threadIdx.x; c < cols / 8; c += FLARE_BLOCK) d[c] = s[c];
  } else {
    for (int c = threadIdx.x; c < cols; c += FLARE_BLOCK) dst[c] = src[c];
  }
}
