// Rotary position embedding in place on q and k (non-interleaved halves, HF's rotate_half):
//   x1' = x1 * cos - x2 * sin,  x2' = x2 * cos + x1 * sin,  for i < ROTARY_HALF in each head,
// angle = position * inv_freq[i] (F32 product, as the reference), cos/sin scaled by the attention
// factor. inv_freq has one row shared by all tokens or one row per step row (dynamic scaling).
// One block per token: cos/sin go to shared memory once, then threads cover heads x pairs.
// Defines: HEAD_DIM, ROTARY_HALF (rotary_dim / 2 <= HEAD_DIM / 2) required; FLARE_BLOCK (default 256).
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

#ifndef HEAD_DIM
#error "rotary needs HEAD_DIM"
#endif
#ifndef ROTARY_HALF
#error "rotary needs ROTARY_HALF"
#endif
#ifndef FLARE_BLOCK
#define FLARE_BLOCK 256
#endif
static_assert(2 * ROTARY_HALF <= HEAD_DIM, "rotary dim exceeds the head dim");

__device__ __forceinline__ void flare_rotate_head(__nv_bfloat16* v, int i, float c, float s) {
  const float x1 = __bfloat162float(v[i]);
  const float x2 = __bfloat162float(v[i + ROTARY_HALF]);
  v[i] = __float2bfloat16(x1 * c - x2 * s);
  v[i + ROTARY_HALF] = __float2bfloat16(x2 * c + x1 * s);
}

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_rotary(__nv_bfloat16* q, long long q_stride, int n_q_heads,  // [n_tokens, n_q_heads * HEAD_DIM]
             __nv_bfloat16* k, long long k_stride, int n_k_heads,  // [n_tokens, n_k_heads * HEAD_DIM]
             const float* __restrict__ inv_freq,                    // [1 or n_rows, ROTARY_HALF] f32
             long long inv_freq_stride, int inv_freq_rows,
             float attention_factor,
             const int* __restrict__ positions,                     // [n_tokens]
             const int* __restrict__ token_rows) {
  flare_pdl_enter();                  // [n_tokens] step row of each token
  __shared__ float cos_s[ROTARY_HALF];
  __shared__ float sin_s[ROTARY_HALF];
  const long long t = blockIdx.x;
  const long long freq_row = inv_freq_rows == 1 ? 0 : token_rows[t];
  const float position = float(positions[t]);
  for (int i = threadIdx.x; i < ROTARY_HALF; i += FLARE_BLOCK) {
    const float angle = __fmul_rn(position, inv_freq[freq_row * inv_freq_stride + i]);
    float s, c;
    sincosf(angle, &s, &c);
    cos_s[i] = c * attention_factor;
    sin_s[i] = s * attention_factor;
  }
  __syncthreads();
  const int n_pairs = (n_q_heads + n_k_heads) * ROTARY_HALF;
  for (int p = threadIdx.x; p < n_pairs; p += FLARE_BLOCK) {
    const int head = p / ROTARY_HALF;
    const int i = p % ROTARY_HALF;
    __nv_bfloat16* v = head < n_q_heads ? q + t * q_stride + (long long)head * HEAD_DIM
                                        : k + t * k_stride + (long long)(head - n_q_heads) * HEAD_DIM;
    flare_rotate_head(v, i, cos_s[i], sin_s[i]);
  }
}
