// Paged KV stores (BF16 or FP8 E4M3 pages) and a plain attention kernel (BF16 pages), F32 math.
// Cache layout (backend.h): [n_layers][n_pages][2 (k, v)][page_size][n_kv_heads][HEAD_DIM].
// A token's page is block_tables[row_first_block[token_rows[t]] + position / page_size].
//   flare_kv_store: one block per token copies its k and v heads into its slot (with KV_FP8, converted
//     to e4m3 with saturation to +-448 and round-to-nearest-even, as the CPU backend does).
//   flare_attention: one warp per (token, query head), online softmax over positions
//     [first, position] (first = position - window + 1 with a sliding window, else 0), GQA by
//     n_heads / n_kv_heads. Each lane holds HEAD_DIM / 32 elements of q and of the accumulator.
//     Straightforward, not tuned: the fallback for head sizes attention_decode.cu and
//     attention_prefill.cu do not cover.
//     Attention sinks (gpt-oss; `sinks` non-null: a logit per query head) join the denominator.
// Defines: HEAD_DIM (required), KV_FP8 (1: flare_kv_store writes e4m3 pages, default 0).
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

#ifndef KV_FP8
#define KV_FP8 0
#endif

#ifndef HEAD_DIM
#error "attention needs HEAD_DIM"
#endif

constexpr int k_per_lane = (HEAD_DIM + 31) / 32;
constexpr int k_warps = 4;

__device__ __forceinline__ long long flare_slot_offset(const int* __restrict__ blocks, int position, int page_size,
                                                       int n_kv_heads, int kv_head, long long page_elems) {
  const int page = blocks[position / page_size];
  const int slot = position % page_size;
  return (long long)page * page_elems + ((long long)slot * n_kv_heads + kv_head) * HEAD_DIM;
}

// grid n_tokens, block 256.
extern "C" __global__ void __launch_bounds__(256)
flare_kv_store(const __nv_bfloat16* __restrict__ k, long long k_stride,  // [n_tokens, n_kv_heads * HEAD_DIM]
               const __nv_bfloat16* __restrict__ v, long long v_stride,
#if KV_FP8
               __nv_fp8_storage_t* __restrict__ cache,
#else
               __nv_bfloat16* __restrict__ cache,
#endif
               int layer, int n_pages, int page_size, int n_kv_heads,
               const int* __restrict__ positions, const int* __restrict__ token_rows,
               const int* __restrict__ row_first_block, const int* __restrict__ block_tables) {
  flare_pdl_enter();
  const long long t = blockIdx.x;
  const long long page_elems = 2LL * page_size * n_kv_heads * HEAD_DIM;
  const long long half_elems = (long long)page_size * n_kv_heads * HEAD_DIM;
  const int* blocks = block_tables + row_first_block[token_rows[t]];
  auto* base = cache + (long long)layer * n_pages * page_elems +
               flare_slot_offset(blocks, positions[t], page_size, n_kv_heads, 0, page_elems);
  const int width = n_kv_heads * HEAD_DIM;  // heads of one slot are contiguous
  for (int c = threadIdx.x; c < width; c += 256) {
#if KV_FP8
    base[c] = __nv_cvt_float_to_fp8(__bfloat162float(k[t * k_stride + c]), __NV_SATFINITE, __NV_E4M3);
    base[half_elems + c] = __nv_cvt_float_to_fp8(__bfloat162float(v[t * v_stride + c]), __NV_SATFINITE, __NV_E4M3);
#else
    base[c] = k[t * k_stride + c];
    base[half_elems + c] = v[t * v_stride + c];
#endif
  }
}

// grid ceil(n_tokens * n_heads / 4), block 128.
extern "C" __global__ void __launch_bounds__(32 * k_warps)
flare_attention(const __nv_bfloat16* __restrict__ q, long long q_stride,  // [n_tokens, n_heads * HEAD_DIM]
                __nv_bfloat16* __restrict__ out, long long out_stride,    // like q
                const __nv_bfloat16* __restrict__ cache, int layer, int n_pages, int page_size, int n_kv_heads,
                int n_tokens, int n_heads, float scale, int sliding_window,
                const int* __restrict__ positions, const int* __restrict__ token_rows,
                const int* __restrict__ row_first_block, const int* __restrict__ block_tables,
                const float* __restrict__ sinks) {  // [n_heads] f32 attention sinks, or null
  flare_pdl_enter();
  const long long warp = (long long)blockIdx.x * k_warps + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (warp >= (long long)n_tokens * n_heads) return;  // whole warps leave together
  const long long t = warp / n_heads;
  const int h = int(warp % n_heads);
  const int kv_head = h / (n_heads / n_kv_heads);
  const long long page_elems = 2LL * page_size * n_kv_heads * HEAD_DIM;
  const long long half_elems = (long long)page_size * n_kv_heads * HEAD_DIM;
  const __nv_bfloat16* layer_base = cache + (long long)layer * n_pages * page_elems;
  const int* blocks = block_tables + row_first_block[token_rows[t]];
  const int position = positions[t];
  const int first = sliding_window > 0 ? max(0, position - sliding_window + 1) : 0;

  float qv[k_per_lane], acc[k_per_lane];
  const __nv_bfloat16* qp = q + t * q_stride + (long long)h * HEAD_DIM;
#pragma unroll
  for (int i = 0; i < k_per_lane; ++i) {
    const int c = lane + 32 * i;
    qv[i] = c < HEAD_DIM ? __bfloat162float(qp[c]) : 0.0f;
    acc[i] = 0.0f;
  }
  float max_score = -__int_as_float(0x7f800000), denominator = 0.0f;  // -inf
  for (int j = first; j <= position; ++j) {
    const __nv_bfloat16* kp = layer_base + flare_slot_offset(blocks, j, page_size, n_kv_heads, kv_head, page_elems);
    const __nv_bfloat16* vp = kp + half_elems;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < k_per_lane; ++i) {
      const int c = lane + 32 * i;
      if (c < HEAD_DIM) s += qv[i] * __bfloat162float(kp[c]);
    }
    for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
    s *= scale;
    const float new_max = fmaxf(max_score, s);
    const float correction = expf(max_score - new_max);  // 0 for the first position
    const float weight = expf(s - new_max);
    denominator = denominator * correction + weight;
#pragma unroll
    for (int i = 0; i < k_per_lane; ++i) {
      const int c = lane + 32 * i;
      if (c < HEAD_DIM) acc[i] = acc[i] * correction + weight * __bfloat162float(vp[c]);
    }
    max_score = new_max;
  }
  float inv = 1.0f / denominator;
  if (sinks != nullptr) {  // the sink joins the denominator (under the larger maximum) and adds no value
    const float top = fmaxf(max_score, sinks[h]), c = expf(max_score - top);
    inv = c / (denominator * c + expf(sinks[h] - top));
  }
  __nv_bfloat16* op = out + t * out_stride + (long long)h * HEAD_DIM;
#pragma unroll
  for (int i = 0; i < k_per_lane; ++i) {
    const int c = lane + 32 * i;
    if (c < HEAD_DIM) op[c] = __float2bfloat16(acc[i] * inv);
  }
}
