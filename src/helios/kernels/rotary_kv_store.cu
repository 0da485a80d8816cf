// The attention block's per-token work before attention, in one launch: for each token,
//   [q/k norm]  each q and k head h = bf16(weight * (h * inv)), inv = 1 / sqrt(mean(h^2) + eps),
//               when the norm weights are given (Qwen3), as head_rms_norm.cu computes it;
//   rotary      q and k rotated in place (non-interleaved halves, bf16 results), as rotary.cu;
//   KV store    the rotated k and v heads written to the token's page slot (bf16, or e4m3 with
//               KV_FP8, saturating, round-to-nearest-even), as attention.cu's flare_kv_store.
// Done apart, these are three to five small launches, each a few microseconds of latency for well
// under one of traffic in a decode step; here each head is read once and kept in registers.
// The same float operations in the same order as those kernels, so results match them bit for bit
// (bar the compiler contracting a rotation product into an FMA differently).
//
// Grid (n_tokens, ceil((n_q_heads + 2 * n_kv_heads) / k_warps)), block 32 * k_warps: each warp
// owns one head of the token (q heads, then k, then v); lane l holds elements l + 32 i. A rotation
// partner lives in another lane, so the warp shares its head through shared memory.
// Per-step inputs (positions, rows, block tables) come from the step descriptor's device arrays.
// Defines: HEAD_DIM, ROTARY_HALF (rotary_dim / 2 <= HEAD_DIM / 2) required; KV_FP8 (default 0).
#include <cuda_bf16.h>
#include <cuda_fp8.h>

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
#error "rotary_kv_store needs HEAD_DIM"
#endif
#ifndef ROTARY_HALF
#error "rotary_kv_store needs ROTARY_HALF"
#endif
#ifndef KV_FP8
#define KV_FP8 0
#endif
static_assert(ROTARY_HALF >= 1 && 2 * ROTARY_HALF <= HEAD_DIM, "rotary dim must be in 2..HEAD_DIM");

constexpr int k_warps = 4;  // heads per CTA: small CTAs spread a decode step's few heads over SMs
constexpr int k_per_lane = (HEAD_DIM + 31) / 32;

#if KV_FP8
typedef __nv_fp8_storage_t kv_t;
__device__ __forceinline__ kv_t flare_to_kv(__nv_bfloat16 x) {
  return __nv_cvt_float_to_fp8(__bfloat162float(x), __NV_SATFINITE, __NV_E4M3);
}
#else
typedef __nv_bfloat16 kv_t;
__device__ __forceinline__ kv_t flare_to_kv(__nv_bfloat16 x) { return x; }
#endif

extern "C" __global__ void __launch_bounds__(32 * k_warps)
flare_rotary_kv_store(__nv_bfloat16* q, long long q_stride, int n_q_heads,       // [n_tokens, n_q_heads * HEAD_DIM]
                      __nv_bfloat16* k, long long k_stride,                      // [n_tokens, n_kv_heads * HEAD_DIM]
                      const __nv_bfloat16* __restrict__ v, long long v_stride,   // like k
                      int n_kv_heads,
                      const float* __restrict__ q_norm, const float* __restrict__ k_norm,  // [HEAD_DIM] f32, or null
                      float eps,
                      const float* __restrict__ inv_freq,                        // [1 or n_rows, ROTARY_HALF] f32
                      long long inv_freq_stride, int inv_freq_rows,
                      float attention_factor,
                      kv_t* __restrict__ cache,  // [n_layers][n_pages][2][page_size][n_kv_heads][HEAD_DIM]
                      int layer, int n_pages, int page_size,
                      const int* __restrict__ positions, const int* __restrict__ token_rows,  // [n_tokens]
                      const int* __restrict__ row_first_block, const int* __restrict__ block_tables) {
  flare_pdl_enter();
  __shared__ float cos_s[ROTARY_HALF];
  __shared__ float sin_s[ROTARY_HALF];
  __shared__ float head_s[k_warps][HEAD_DIM];  // each warp's head, where lanes find rotation partners
  const long long t = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int head = blockIdx.y * k_warps + warp;  // uniform across the warp
  const int n_k_end = n_q_heads + n_kv_heads;
  const bool active = head < n_k_end + n_kv_heads;
  const bool is_q = head < n_q_heads, is_v = head >= n_k_end;
  const int kv_head = is_q ? 0 : is_v ? head - n_k_end : head - n_q_heads;

  // Issue this warp's loads before the rotation table is computed, so their latencies overlap.
  __nv_bfloat16* qk = nullptr;  // the head to rotate in place (q or k), null for v
  const __nv_bfloat16* src;
  if (is_q) {
    qk = q + t * q_stride + (long long)head * HEAD_DIM;
    src = qk;
  } else if (!is_v) {
    qk = k + t * k_stride + (long long)kv_head * HEAD_DIM;
    src = qk;
  } else {
    src = v + t * v_stride + (long long)kv_head * HEAD_DIM;
  }
  __nv_bfloat16 raw[k_per_lane];
#pragma unroll
  for (int i = 0; i < k_per_lane; ++i) {
    const int c = lane + 32 * i;
    raw[i] = active && c < HEAD_DIM ? src[c] : __float2bfloat16(0.0f);
  }
  const int position = positions[t];
  const int row = token_rows[t];

  const long long freq_row = inv_freq_rows == 1 ? 0 : row;
  for (int i = threadIdx.x; i < ROTARY_HALF; i += 32 * k_warps) {
    const float angle = __fmul_rn(float(position), inv_freq[freq_row * inv_freq_stride + i]);
    float s, c;
    sincosf(angle, &s, &c);
    cos_s[i] = c * attention_factor;
    sin_s[i] = s * attention_factor;
  }
  __syncthreads();
  if (!active) return;  // whole warps leave together, after the block's only barrier

  if (!is_v) {
    float values[k_per_lane];
#pragma unroll
    for (int i = 0; i < k_per_lane; ++i) values[i] = __bfloat162float(raw[i]);
    const float* norm = is_q ? q_norm : k_norm;
    if (norm) {
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < k_per_lane; ++i) sum += values[i] * values[i];  // lanes past HEAD_DIM hold 0
      for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      const float inv = 1.0f / sqrtf(sum / float(HEAD_DIM) + eps);
#pragma unroll
      for (int i = 0; i < k_per_lane; ++i) {
        const int c = lane + 32 * i;
        // bf16 as head_rms_norm stores it for rotary to read.
        if (c < HEAD_DIM) values[i] = __bfloat162float(__float2bfloat16(norm[c] * (values[i] * inv)));
      }
    }
    float* shared = head_s[warp];
#pragma unroll
    for (int i = 0; i < k_per_lane; ++i) {
      const int c = lane + 32 * i;
      if (c < HEAD_DIM) shared[c] = values[i];
    }
    __syncwarp();
#pragma unroll
    for (int i = 0; i < k_per_lane; ++i) {
      const int c = lane + 32 * i;
      if (c < ROTARY_HALF) {  // x1' = x1 * cos - x2 * sin
        const float x1 = values[i], x2 = shared[c + ROTARY_HALF];
        raw[i] = __float2bfloat16(x1 * cos_s[c] - x2 * sin_s[c]);
      } else if (c < 2 * ROTARY_HALF) {  // x2' = x2 * cos + x1 * sin
        const int j = c - ROTARY_HALF;
        const float x1 = shared[j], x2 = values[i];
        raw[i] = __float2bfloat16(x2 * cos_s[j] + x1 * sin_s[j]);
      } else {  // past the rotary dims: the (normed) value as it is
        raw[i] = __float2bfloat16(values[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < k_per_lane; ++i) {
      const int c = lane + 32 * i;
      if (c < HEAD_DIM) qk[c] = raw[i];
    }
  }

  if (is_q) return;
  // k or v: the token's slot, K half or V half of its page.
  const long long half_elems = (long long)page_size * n_kv_heads * HEAD_DIM;
  const long long page_elems = 2 * half_elems;
  const int page = block_tables[row_first_block[row] + position / page_size];
  const int slot = position % page_size;
  kv_t* dst = cache + ((long long)layer * n_pages + page) * page_elems + (is_v ? half_elems : 0) +
              ((long long)slot * n_kv_heads + kv_head) * HEAD_DIM;
#pragma unroll
  for (int i = 0; i < k_per_lane; ++i) {
    const int c = lane + 32 * i;
    if (c < HEAD_DIM) dst[c] = flare_to_kv(raw[i]);
  }
}
