// Split-KV paged attention for decode steps (every row computes one query token, so token t is row t).
// Cache layout (backend.h): [n_layers][n_pages][2 (k, v)][page_size][n_kv_heads][HEAD_DIM], bf16 or
// fp8 e4m3 (per-tensor scale 1). A position's page is block_tables[row_first_block[row] + pos / page_size].
//
//   flare_attention_decode: grid (n_splits, n_kv_heads * n_head_groups, n_rows), block 128.
//     One CTA takes GROUP query heads that share one kv head (all of them when the GQA group is <= 8),
//     so each K/V element is read from memory once per CTA and used GROUP times. Lanes hold 8
//     consecutive dims of one key (16-byte loads for bf16, 8 for fp8); HEAD_DIM / 8 lanes cover a key,
//     a warp covers 32 / (HEAD_DIM / 8) keys per load and k_unroll loads per iteration, and issues the
//     next iteration's loads before this one's math (registers double-buffered). Each key group
//     keeps its own online softmax (base 2, F32); warps merge in shared memory at the end.
//     The grid depends only on (n_rows, heads, n_splits), never on positions, so a CUDA graph replays
//     it for any lengths: each split reads its row's length from `positions` and takes an equal share
//     of the keys (rounded to whole CTA iterations); splits left without keys write an empty partial.
//     With n_splits == 1 the CTA normalizes and writes `out` itself.
//   flare_attention_decode_merge: grid (n_rows, n_heads), block HEAD_DIM. Log-sum-exp merge of the
//     splits' partials into `out`.
// Partials: acc [n_rows][n_heads][n_splits][HEAD_DIM] f32 (unnormalized, relative to the split's
// maximum), ml [n_rows][n_heads][n_splits] float2 (maximum score in log2 units, sum of weights).
// Defines: HEAD_DIM (64, 128 or 256, required), GROUP (query heads per CTA, 1..8, default 1),
// KV_FP8 (1: e4m3 pages, default 0).
#include <cuda_bf16.h>

#ifndef HEAD_DIM
#error "attention_decode needs HEAD_DIM"
#endif
#ifndef GROUP
#define GROUP 1
#endif
#ifndef KV_FP8
#define KV_FP8 0
#endif

#if HEAD_DIM != 64 && HEAD_DIM != 128 && HEAD_DIM != 256
#error "attention_decode supports HEAD_DIM 64, 128 and 256"
#endif
#if GROUP < 1 || GROUP > 8
#error "attention_decode takes 1..8 query heads per CTA"
#endif

constexpr int k_warps = 4;
constexpr int k_lanes_per_key = HEAD_DIM / 8;                 // 8 dims per lane
constexpr int k_keys_per_load = 32 / k_lanes_per_key;         // keys a warp reads per load
// Loads per lane per iteration; the next iteration's loads are issued before this one's math, so
// twice as many are in flight. FP8 loads are half as wide, so there are twice as many of them.
// (On an H200, 32 rows x 8k: 2 and 4 (bf16) or 4 and 8 (fp8) ran alike; more registers only cost.)
constexpr int k_unroll = 2 * (KV_FP8 ? 2 : 1);
constexpr int k_keys_per_warp_iter = k_keys_per_load * k_unroll;
constexpr int k_keys_per_cta_iter = k_keys_per_warp_iter * k_warps;

#if KV_FP8
typedef unsigned char kv_t;
typedef uint2 kv_chunk;  // 8 e4m3 values
#else
typedef __nv_bfloat16 kv_t;
typedef uint4 kv_chunk;  // 8 bf16 values
#endif

__device__ __forceinline__ float flare_neg_inf() { return -__int_as_float(0x7f800000); }

// exp2(x - m) where m == -inf means "no score yet" (the result is then 0 for x == -inf too).
__device__ __forceinline__ float flare_exp2_from(float x, float m) {
  return exp2f(x - (m == flare_neg_inf() ? 0.0f : m));
}

// Two e4m3 values (the low 16 bits of `pair`, element 0 lowest) -> f32, exact. sm_89+ converts in
// hardware; before, the byte's exponent and mantissa go into an f32 (bias 127 instead of 7, which also
// keeps subnormals right) scaled by 2^120.
__device__ __forceinline__ void flare_e4m3x2_to_f32(unsigned int pair, float& x0, float& x1) {
#if __CUDA_ARCH__ >= 890
  unsigned int h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((unsigned short)pair));
  asm("{ .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.f32.f16 %0, lo;\n cvt.f32.f16 %1, hi; }"
      : "=f"(x0), "=f"(x1) : "r"(h2));
#else
  x0 = __uint_as_float(((pair & 0x7fu) << 20) | ((pair & 0x80u) << 24)) * 1.329227995784916e36f;  // 2^120
  x1 = __uint_as_float(((pair & 0x7f00u) << 12) | ((pair & 0x8000u) << 16)) * 1.329227995784916e36f;
#endif
}

__device__ __forceinline__ void flare_unpack8(const kv_chunk& c, float* x) {
#if KV_FP8
  flare_e4m3x2_to_f32(c.x, x[0], x[1]);
  flare_e4m3x2_to_f32(c.x >> 16, x[2], x[3]);
  flare_e4m3x2_to_f32(c.y, x[4], x[5]);
  flare_e4m3x2_to_f32(c.y >> 16, x[6], x[7]);
#else
  const unsigned int w[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = __uint_as_float(w[i] << 16);
    x[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
#endif
}

// grid (n_splits, n_kv_heads * n_head_groups, n_rows), block 128.
extern "C" __global__ void __launch_bounds__(32 * k_warps)
flare_attention_decode(const __nv_bfloat16* __restrict__ q, long long q_stride,  // [n_rows, n_heads * HEAD_DIM]
                       __nv_bfloat16* __restrict__ out, long long out_stride,    // like q (n_splits == 1)
                       float* __restrict__ partial_acc, float2* __restrict__ partial_ml,
                       const kv_t* __restrict__ cache, int layer, int n_pages, int page_size, int n_kv_heads,
                       int n_heads, float scale_log2, int sliding_window, int n_splits,
                       const int* __restrict__ positions, const int* __restrict__ row_first_block,
                       const int* __restrict__ block_tables) {
  __shared__ float s_acc[k_warps][GROUP][HEAD_DIM];
  __shared__ float s_m[k_warps][GROUP], s_l[k_warps][GROUP];

  const int split = blockIdx.x, row = blockIdx.z;
  const int group_size = n_heads / n_kv_heads;
  const int n_head_groups = group_size / GROUP;
  const int kv_head = blockIdx.y / n_head_groups;
  const int head0 = kv_head * group_size + (blockIdx.y % n_head_groups) * GROUP;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int key_slot = lane / k_lanes_per_key;  // which key of a load this lane reads
  const int dim0 = (lane % k_lanes_per_key) * 8;

  // This split's share of the row's keys [first, length).
  const int length = positions[row] + 1;
  const int first = sliding_window > 0 ? max(0, length - sliding_window) : 0;
  int chunk = (length - first + n_splits - 1) / n_splits;
  chunk = (chunk + k_keys_per_cta_iter - 1) / k_keys_per_cta_iter * k_keys_per_cta_iter;
  const int begin = first + split * chunk;
  const int end = min(length, begin + chunk);

  float qv[GROUP][8], acc[GROUP][8], m[GROUP], l[GROUP];
#pragma unroll
  for (int g = 0; g < GROUP; ++g) {
    const __nv_bfloat16* qp = q + (long long)row * q_stride + (long long)(head0 + g) * HEAD_DIM + dim0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      qv[g][i] = __bfloat162float(qp[i]);
      acc[g][i] = 0.0f;
    }
    m[g] = flare_neg_inf();
    l[g] = 0.0f;
  }

  const long long half_elems = (long long)page_size * n_kv_heads * HEAD_DIM;
  const long long page_elems = 2 * half_elems;
  const kv_t* layer_base = cache + (long long)layer * n_pages * page_elems + (long long)kv_head * HEAD_DIM + dim0;
  const int* blocks = block_tables + row_first_block[row];

  // Loads this lane's K and V chunks of the keys of the warp iteration at `base` (those before `end`).
  const auto load = [&](int base, kv_chunk* kc, kv_chunk* vc) {
#pragma unroll
    for (int u = 0; u < k_unroll; ++u) {
      const int key = base + u * k_keys_per_load + key_slot;
      if (key < end) {
        const kv_t* kp = layer_base + (long long)blocks[key / page_size] * page_elems +
                         (long long)(key % page_size) * n_kv_heads * HEAD_DIM;
        kc[u] = *reinterpret_cast<const kv_chunk*>(kp);
        vc[u] = *reinterpret_cast<const kv_chunk*>(kp + half_elems);
      }
    }
  };
  kv_chunk kc[k_unroll], vc[k_unroll];
  load(begin + warp * k_keys_per_warp_iter, kc, vc);
  for (int base = begin + warp * k_keys_per_warp_iter; base < end; base += k_keys_per_cta_iter) {
    kv_chunk k_next[k_unroll], v_next[k_unroll];
    load(base + k_keys_per_cta_iter, k_next, v_next);  // in flight while this iteration computes
    float s[k_unroll][GROUP];
#pragma unroll
    for (int u = 0; u < k_unroll; ++u) {
      float k[8];
      flare_unpack8(kc[u], k);
#pragma unroll
      for (int g = 0; g < GROUP; ++g) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < 8; ++i) dot = fmaf(qv[g][i], k[i], dot);
#pragma unroll
        for (int offset = k_lanes_per_key / 2; offset > 0; offset >>= 1) {
          dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        }
        s[u][g] = base + u * k_keys_per_load + key_slot < end ? dot * scale_log2 : flare_neg_inf();
      }
    }
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
      float new_m = m[g];
#pragma unroll
      for (int u = 0; u < k_unroll; ++u) new_m = fmaxf(new_m, s[u][g]);
      const float correction = flare_exp2_from(m[g], new_m);
      l[g] *= correction;
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[g][i] *= correction;
      m[g] = new_m;
    }
#pragma unroll
    for (int u = 0; u < k_unroll; ++u) {
      if (base + u * k_keys_per_load + key_slot >= end) continue;  // vc[u] was not loaded
      float v[8];
      flare_unpack8(vc[u], v);
#pragma unroll
      for (int g = 0; g < GROUP; ++g) {
        const float p = flare_exp2_from(s[u][g], m[g]);
        l[g] += p;
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[g][i] = fmaf(p, v[i], acc[g][i]);
      }
    }
#pragma unroll
    for (int u = 0; u < k_unroll; ++u) {
      kc[u] = k_next[u];
      vc[u] = v_next[u];
    }
  }

  // Merge the key groups of the warp (lanes with the same dims), then the warps.
#pragma unroll
  for (int offset = k_lanes_per_key; offset < 32; offset <<= 1) {
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
      const float other_m = __shfl_xor_sync(0xffffffffu, m[g], offset);
      const float other_l = __shfl_xor_sync(0xffffffffu, l[g], offset);
      const float new_m = fmaxf(m[g], other_m);
      const float mine = flare_exp2_from(m[g], new_m), theirs = flare_exp2_from(other_m, new_m);
      l[g] = l[g] * mine + other_l * theirs;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        acc[g][i] = acc[g][i] * mine + __shfl_xor_sync(0xffffffffu, acc[g][i], offset) * theirs;
      }
      m[g] = new_m;
    }
  }
  if (lane < k_lanes_per_key) {
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
#pragma unroll
      for (int i = 0; i < 8; ++i) s_acc[warp][g][dim0 + i] = acc[g][i];
      if (lane == 0) {
        s_m[warp][g] = m[g];
        s_l[warp][g] = l[g];
      }
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < GROUP * HEAD_DIM; e += 32 * k_warps) {
    const int g = e / HEAD_DIM, d = e % HEAD_DIM;
    float total_m = flare_neg_inf();
#pragma unroll
    for (int w = 0; w < k_warps; ++w) total_m = fmaxf(total_m, s_m[w][g]);
    float total_l = 0.0f, total_acc = 0.0f;
#pragma unroll
    for (int w = 0; w < k_warps; ++w) {
      const float weight = flare_exp2_from(s_m[w][g], total_m);
      total_l += s_l[w][g] * weight;
      total_acc += s_acc[w][g][d] * weight;
    }
    const int head = head0 + g;
    if (n_splits == 1) {
      out[(long long)row * out_stride + (long long)head * HEAD_DIM + d] = __float2bfloat16(total_acc / total_l);
    } else {
      const long long slot = ((long long)row * n_heads + head) * n_splits + split;
      partial_acc[slot * HEAD_DIM + d] = total_acc;
      if (d == 0) partial_ml[slot] = make_float2(total_m, total_l);
    }
  }
}

// grid (n_rows, n_heads), block HEAD_DIM.
extern "C" __global__ void __launch_bounds__(HEAD_DIM)
flare_attention_decode_merge(const float* __restrict__ partial_acc, const float2* __restrict__ partial_ml,
                             __nv_bfloat16* __restrict__ out, long long out_stride, int n_heads, int n_splits) {
  const int row = blockIdx.x, head = blockIdx.y, d = threadIdx.x;
  const long long first_slot = ((long long)row * n_heads + head) * n_splits;
  float total_m = flare_neg_inf();
  for (int s = 0; s < n_splits; ++s) total_m = fmaxf(total_m, partial_ml[first_slot + s].x);
  float total_l = 0.0f, total_acc = 0.0f;
  for (int s = 0; s < n_splits; ++s) {
    const float2 ml = partial_ml[first_slot + s];
    if (ml.y == 0.0f) continue;  // a split without keys: its acc is not written
    const float weight = exp2f(ml.x - total_m);
    total_l += ml.y * weight;
    total_acc += partial_acc[(first_slot + s) * HEAD_DIM + d] * weight;
  }
  out[(long long)row * out_stride + (long long)head * HEAD_DIM + d] = __float2bfloat16(total_acc / total_l);
}
