// Per-head RMSNorm in place (Qwen3's q/k norm): each head_dim slice of a row becomes
// bf16(weight * (v * inv)), inv = 1 / sqrt(mean(v^2) + eps), F32 accumulation. One warp per
// (token, head); the head's values stay in registers between the reduction and the write.
// Defines: HEAD_DIM (required), FLARE_BLOCK (threads per block, a multiple of 32, default 256).
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
#error "head_rms_norm needs HEAD_DIM"
#endif
#ifndef FLARE_BLOCK
#define FLARE_BLOCK 256
#endif

constexpr int k_per_lane = (HEAD_DIM + 31) / 32;

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_head_rms_norm(__nv_bfloat16* x, long long stride,  // [rows, n_heads * HEAD_DIM]
                    int rows, int n_heads,
                    const float* __restrict__ weight,     // [HEAD_DIM] f32
                    float eps) {
  flare_pdl_enter();
  const long long warp = (blockIdx.x * (long long)FLARE_BLOCK + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (warp >= (long long)rows * n_heads) return;  // whole warps leave together
  const long long t = warp / n_heads;
  const int h = int(warp % n_heads);
  __nv_bfloat16* v = x + t * stride + (long long)h * HEAD_DIM;
  float values[k_per_lane];
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < k_per_lane; ++i) {
    const int c = lane + 32 * i;
    values[i] = c < HEAD_DIM ? __bfloat162float(v[c]) : 0.0f;
    sum += values[i] * values[i];
  }
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  const float inv = 1.0f / sqrtf(sum / float(HEAD_DIM) + eps);
#pragma unroll
  for (int i = 0; i < k_per_lane; ++i) {
    const int c = lane + 32 * i;
    if (c < HEAD_DIM) v[c] = __float2bfloat16(weight[c] * (values[i] * inv));
  }
}
