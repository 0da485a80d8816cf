// Mixture-of-experts MLP (Backend::moe_experts): out[t] = sum_j weights[t, j] * down[e] @
// act(gate_up[e] @ x[t]), e = ids[t, j], bf16 activations and weights, F32 accumulation; each
// expert's gate and up values are rounded to bf16 (linear's numerics), the activation is F32 math
// rounded once (swiglu's), each expert's down row is rounded to bf16, and the weighted sum over
// the slots is F32, rounded once.
//
// The host launches, in order, on a grid that depends only on the shapes (never on the routing, so
// a captured step replays for any routing):
//   flare_moe_experts_align: one CTA groups the n_tokens * top_k (token, slot) pairs by expert:
//     sorted_pairs[r] (pair index t * top_k + j) with each expert's pairs consecutive, pair_pos[p]
//     (the sorted row of pair p, -1 for an expert id outside 0..n_experts-1: that slot adds
//     nothing), and work tiles of at most `tile_rows` consecutive sorted rows of one expert:
//     tiles[0] = n_tiles, tile i at tiles[4 + 3 i] = (expert, first row, end row).
//   gate_up then down, each a grouped product over the tiles; the grid's y is the worst-case tile
//   count, ceil(pairs / tile_rows) + min(n_experts, pairs), and CTAs past n_tiles return at once:
//     flare_moe_experts_mma_{gate_up,down}: tensor cores (mma.sync m16n8k16 bf16), tiles of 64
//       rows, a 3-stage cp.async pipeline. gate_up gathers its A rows (x rows of the tile's
//       tokens) through sorted_pairs, computes 64 gate and the 64 matching up columns and writes
//       act rows (its epilogue applies the activation); down multiplies act rows by down[e] in
//       128-column blocks and writes expert_out rows.
//     flare_moe_experts_gemv_{gate_up,down}: the decode shapes (a few pairs): tiles of up to 8
//       rows, a warp per output column (gate_up: its gate and up weight rows; down: two columns),
//       each lane streaming 16-byte weight chunks past L1, so an expert's weights are read once
//       per step however many of the tile's rows use them.
//   flare_moe_experts_combine: out[t] = sum over slots, in slot order, of weight * expert_out row.
// Rows of act and expert_out are sorted rows, not pair indices.
// Each product comes in three weight formats: BF16 stacks, MXFP4 stacks (the *_mxfp4 entry points,
// gpt-oss: values u8 [E][rows, k / 2], two E2M1 values a byte, element 2j in the low nibble, and
// E8M0 scales u8 [E][rows, k / 32]), which stay MXFP4 in memory (half a byte a value, plus a 32nd
// of a byte) and are decoded as they are loaded: the GEMV decodes a lane's 16-byte chunk (32 values,
// one scale) in registers, the GEMM decodes each stage's 32-value slices of its 128 weight rows
// into a BF16 tile in shared memory (exactly: an E2M1 value times a power of two is a BF16 value).
// FP8 stacks (the *_fp8 entry points, Qwen3 FP8 checkpoints: values E4M3 [E][rows, k], a byte a
// value, and F32 scales [E][ceil(rows / block_rows), ceil(k / block_cols)], value (r, c) standing for
// e4m3 * scales[r / block_rows][c / block_cols]) stay FP8 in memory too. Each value is decoded to
// bf16(e4m3 * scale), the BF16 weight a dequantizing load would hold (and the CPU backend uses), so
// every path multiplies exactly the same weights: the GEMV rounds a lane's 16 values in registers,
// the GEMM decodes each stage's 32-value slices into the BF16 tile as for MXFP4. A stage or chunk
// never straddles two scale blocks: block_cols is a power of two of at least 32, or spans k
// (block_cols_log2 is then large enough that every column maps to scale column 0).
// Both take optional F32 biases ([E][1, 2 inter] for gate_up, [E][1, hidden] for down; null: none),
// added to the F32 products before they are rounded, and gate_up's activation is silu, gelu_tanh
// or gpt-oss's clamped SwiGLU (g = min(g, limit), u = clamp(u, -limit, limit), (u + 1) g
// sigmoid(alpha g)).
//
// Requires (the host checks): hidden % 8 == 0 and inter % 8 == 0 (MXFP4 and FP8: % 32); x, act,
// expert_out, out and the weight stacks 16-byte aligned with row (and expert) strides multiples of 16
// bytes (MXFP4 scales: any alignment; FP8 scales: 4-byte aligned).
// The weight formats' layouts, decoding and the GEMV's chunk products: moe_weight_formats.cuh.
// Defines: none.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "moe_weight_formats.cuh"

// Programmatic dependent launch (sm_90+, when the host launches with it): the next kernel may start
// launching once every CTA of this one has started, and this one waits for the previous kernel to
// finish before touching global memory. Both are no-ops for a plain launch.
__device__ __forceinline__ void flare_pdl_enter() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ float flare_round_bf16(float v) { return __bfloat162float(__float2bfloat16(v)); }

// act(gate) * up in F32 of the bf16-rounded gate and up (activation 0: silu, 1: gelu_tanh, 2:
// clamped silu with `limit` and `alpha`, gpt-oss).
__device__ __forceinline__ float flare_moe_act(int activation, float g, float u, float limit, float alpha) {
  g = flare_round_bf16(g);
  u = flare_round_bf16(u);
  if (activation == 2) {
    g = fminf(g, limit);
    u = fmaxf(-limit, fminf(u, limit));
    return (u + 1.0f) * g / (1.0f + expf(-alpha * g));
  }
  if (activation == 1) {
    const float k_sqrt_2_over_pi = 0.7978845608028654f;
    return 0.5f * g * (1.0f + tanhf(k_sqrt_2_over_pi * (g + 0.044715f * g * g * g))) * u;
  }
  return g / (1.0f + expf(-g)) * u;
}

// The gated activation's parameters and the expert's biases (null: none) of one product.
struct FlareMoeEpilogue {
  const float* bias;  // this expert's [n_out] (down) or [2 n_out] (gate_up: gate, then up), or null
  int activation;
  float limit, alpha;
};

// A tile of the align kernel's list: expert and sorted rows [begin, end); false past n_tiles.
struct FlareMoeTile {
  int expert, begin, end;
};
__device__ __forceinline__ bool flare_moe_tile(const int* __restrict__ tiles, FlareMoeTile& tile) {
  if (int(blockIdx.y) >= tiles[0]) return false;
  const int* t = tiles + 4 + 3 * blockIdx.y;
  tile.expert = t[0];
  tile.begin = t[1];
  tile.end = t[2];
  return true;
}

// ---------------------------------------------------------------------------------------------
// Align.

constexpr int k_align_threads = 1024;

// Groups the n_tokens * top_k (token, slot) pairs by expert, as the header describes, with the
// THREADS threads of the CTA: `counts` and `cursor` are [n_experts] ints of shared memory,
// `warp_sums` THREADS / 32 long longs and `carry` one, of shared memory; tiles, sorted_pairs and
// pair_pos are global.
template <int THREADS>
__device__ __forceinline__ void flare_moe_align(const int* __restrict__ ids, long long ids_stride, int n_tokens,
                                                int top_k, int n_experts, int tile_rows, int* counts, int* cursor,
                                                long long* warp_sums, long long& carry, int* tiles, int* sorted_pairs,
                                                int* pair_pos) {
  constexpr int n_warps = THREADS / 32;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int n_pairs = n_tokens * top_k;
  for (int e = tid; e < n_experts; e += THREADS) counts[e] = 0;
  if (tid == 0) carry = 0;
  __syncthreads();

  // Counts, one shared atomic per expert a warp holds (a step where every pair picks one expert
  // would otherwise serialize on one address).
  for (int base = 0; base < n_pairs; base += THREADS) {
    const int p = base + tid;
    int e = p < n_pairs ? ids[(long long)(p / top_k) * ids_stride + p % top_k] : -1;
    if (e < 0 || e >= n_experts) e = -1;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const int leader = __ffs(same) - 1;
    if (e >= 0 && lane == leader) atomicAdd(&counts[e], __popc(same));
  }
  __syncthreads();

  // Exclusive scan of (rows, tiles) over the experts, THREADS experts at a time; each expert's
  // thread writes its tiles.
  for (int base = 0; base < n_experts; base += THREADS) {
    const int e = base + tid;
    const int c = e < n_experts ? counts[e] : 0;
    const int n_tiles = (c + tile_rows - 1) / tile_rows;
    const long long v = ((long long)n_tiles << 32) | (long long)c;
    long long inclusive = v;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const long long up = __shfl_up_sync(0xffffffffu, inclusive, o);
      if (lane >= o) inclusive += up;
    }
    if (lane == 31) warp_sums[warp] = inclusive;
    __syncthreads();
    if (warp == 0) {
      long long s = lane < n_warps ? warp_sums[lane] : 0;
#pragma unroll
      for (int o = 1; o < 32; o *= 2) {
        const long long up = __shfl_up_sync(0xffffffffu, s, o);
        if (lane >= o) s += up;
      }
      if (lane < n_warps) warp_sums[lane] = s;  // inclusive over warps
    }
    __syncthreads();
    const long long exclusive = carry + inclusive - v + (warp > 0 ? warp_sums[warp - 1] : 0);
    if (e < n_experts) {
      const int row0 = int(exclusive & 0xffffffffll), tile0 = int(exclusive >> 32);
      cursor[e] = row0;
      for (int i = 0; i < n_tiles; ++i) {
        int* t = tiles + 4 + 3 * (tile0 + i);
        t[0] = e;
        t[1] = row0 + i * tile_rows;
        t[2] = min(row0 + (i + 1) * tile_rows, row0 + c);
      }
    }
    __syncthreads();  // every thread read carry and warp_sums
    if (tid == 0) carry += warp_sums[n_warps - 1];
    __syncthreads();
  }
  if (tid == 0) tiles[0] = int(carry >> 32);

  // Scatter: each pair takes the next row of its expert.
  for (int base = 0; base < n_pairs; base += THREADS) {
    const int p = base + tid;
    int e = p < n_pairs ? ids[(long long)(p / top_k) * ids_stride + p % top_k] : -1;
    if (e < 0 || e >= n_experts) e = -1;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const int leader = __ffs(same) - 1;
    int first = 0;
    if (e >= 0 && lane == leader) first = atomicAdd(&cursor[e], __popc(same));
    first = __shfl_sync(0xffffffffu, first, leader);
    if (p < n_pairs) {
      if (e >= 0) {
        const int pos = first + __popc(same & ((1u << lane) - 1u));
        sorted_pairs[pos] = p;
        pair_pos[p] = pos;
      } else {
        pair_pos[p] = -1;
      }
    }
  }
}

// Dynamic shared memory: 2 * n_experts ints. grid 1, block k_align_threads.
extern "C" __global__ void __launch_bounds__(k_align_threads)
flare_moe_experts_align(const int* __restrict__ ids, long long ids_stride,  // [n_tokens, top_k]
                        int n_tokens, int top_k, int n_experts, int tile_rows,
                        int* __restrict__ tiles,         // [4 + 3 * max tiles]
                        int* __restrict__ sorted_pairs,  // [n_tokens * top_k]
                        int* __restrict__ pair_pos) {    // [n_tokens * top_k]
  extern __shared__ int flare_align_smem[];
  __shared__ long long warp_sums[k_align_threads / 32];
  __shared__ long long carry;  // rows (low 32 bits) and tiles (high) of the experts scanned so far
  flare_pdl_enter();
  flare_moe_align<k_align_threads>(ids, ids_stride, n_tokens, top_k, n_experts, tile_rows, flare_align_smem,
                                   flare_align_smem + n_experts, warp_sums, carry, tiles, sorted_pairs, pair_pos);
}

// ---------------------------------------------------------------------------------------------
// Tensor-core grouped GEMM.

constexpr int k_mma_threads = 128;  // 4 warps, 2 x 2 over the tile
constexpr int k_mma_m = 64;         // tile rows (pairs)
constexpr int k_mma_n = 128;        // weight rows per CTA (gate_up: 64 gate + the 64 matching up)
constexpr int k_mma_k = 32;         // k per stage
constexpr int k_mma_stages = 3;
constexpr int k_mma_lds = k_mma_k + 8;  // smem row stride (bf16): 80 bytes, ldmatrix conflict-free

__device__ __forceinline__ unsigned flare_smem_address(const void* p) { return unsigned(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void flare_cp_async_16(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void flare_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// 4 bytes (cp.async.cg takes only 16): an FP8 scale.
__device__ __forceinline__ void flare_cp_async_4(unsigned dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}
template <int N>
__device__ __forceinline__ void flare_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

__device__ __forceinline__ void flare_ldmatrix_x4(unsigned address, unsigned& r0, unsigned& r1, unsigned& r2,
                                                  unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(address));
}

// d += a (16x16 bf16, row) * b (16x8 bf16, col), f32 accumulators.
__device__ __forceinline__ void flare_mma(float* d, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// First smem weight row of warp column wn's n8 tiles 2 jp and 2 jp + 1: gate_up: tiles 0-3 are gate
// columns 32 wn.., tiles 4-7 the matching up columns (rows 64 + 32 wn..); down: columns 64 wn..
template <bool GATE>
__device__ __forceinline__ int flare_mma_b_row(int wn, int jp) {
  return GATE ? (jp < 2 ? 32 * wn + 16 * jp : 64 + 32 * wn + 16 * (jp - 2)) : 64 * wn + 16 * jp;
}

// Shared memory of the GEMM's weight tiles. BF16: the ring of k_mma_stages [128][32] bf16 slices.
// MXFP4: the ring holds each row's 16 value bytes of the stage (32 values) and the 16-byte aligned
// scale bytes around its one scale (cp.async needs 16-byte aligned sources; a scale row is
// k / 32 bytes, rarely a multiple of 16), and one BF16 slice the stage is decoded into.
// FP8: each row's 32 value bytes of the stage and its one F32 scale, and the decoded BF16 slice.
template <int FMT>
struct FlareMoeBTiles {
  __nv_bfloat16 b[k_mma_stages][k_mma_n][k_mma_lds];
};
template <>
struct FlareMoeBTiles<k_fmt_mxfp4> {
  uint4 values[k_mma_stages][k_mma_n];
  uint4 scales[k_mma_stages][k_mma_n];
  __nv_bfloat16 b[1][k_mma_n][k_mma_lds];
};
template <>
struct FlareMoeBTiles<k_fmt_fp8> {
  uint4 values[k_mma_stages][k_mma_n][2];
  float scales[k_mma_stages][k_mma_n];
  __nv_bfloat16 b[1][k_mma_n][k_mma_lds];
};

// GATE: a = x [n_tokens, k_dim], rows gathered through sorted_pairs / top_k; w = gate_up stack,
// n_out = inter; out = act rows. Else: a = act [pairs, k_dim] in sorted rows; w = down stack,
// n_out = hidden; out = expert_out rows. grid (ceil(n_out / (GATE ? 64 : 128)), max tiles).
template <bool GATE, int FMT>
__device__ __forceinline__ void flare_moe_mma(const __nv_bfloat16* __restrict__ a, long long a_stride,
                                              const int* __restrict__ sorted_pairs, int top_k,
                                              const int* __restrict__ tiles, const FlareMoeWeights& wt,
                                              FlareMoeEpilogue ep, long long bias_expert_stride, int n_out, int k_dim,
                                              __nv_bfloat16* __restrict__ out, long long out_stride) {
  __shared__ __align__(16) __nv_bfloat16 a_s[k_mma_stages][k_mma_m][k_mma_lds];
  __shared__ __align__(16) FlareMoeBTiles<FMT> b_t;
  __shared__ const __nv_bfloat16* a_rows[k_mma_m];
  __shared__ const unsigned char* b_rows[k_mma_n];  // the row's first byte (values), or null
  __shared__ const unsigned char* s_rows[k_mma_n];  // MXFP4: the row's first scale byte; FP8: scale row
  flare_pdl_enter();
  FlareMoeTile tile;
  if (!flare_moe_tile(tiles, tile)) return;
  const int count = tile.end - tile.begin;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / 2, wn = warp % 2;
  const int n0 = blockIdx.x * (GATE ? k_mma_n / 2 : k_mma_n);
  const int elem_bytes = FMT == k_fmt_bf16 ? 2 : 1;
  const unsigned char* w_e =
      static_cast<const unsigned char*>(wt.w) + (long long)tile.expert * wt.w_expert_stride * elem_bytes;
  if (ep.bias != nullptr) ep.bias += (long long)tile.expert * bias_expert_stride;

  // Row addresses; null for rows past the tile or the matrix (loaded as zeros).
  for (int r = tid; r < k_mma_m; r += k_mma_threads) {
    const __nv_bfloat16* row = nullptr;
    if (r < count) {
      const long long src = GATE ? sorted_pairs[tile.begin + r] / top_k : tile.begin + r;
      row = a + src * a_stride;
    }
    a_rows[r] = row;
  }
  for (int r = tid; r < k_mma_n; r += k_mma_threads) {
    const int col = GATE ? n0 + (r % 64) : n0 + r;
    const long long w_row = GATE ? (r < 64 ? col : n_out + col) : col;
    b_rows[r] = col < n_out ? w_e + w_row * wt.w_stride * elem_bytes : nullptr;
    if (FMT == k_fmt_mxfp4) {
      s_rows[r] = col < n_out ? wt.scales + (long long)tile.expert * wt.s_expert_stride + w_row * wt.s_stride : nullptr;
    } else if (FMT == k_fmt_fp8) {
      const float* s = reinterpret_cast<const float*>(wt.scales) + (long long)tile.expert * wt.s_expert_stride +
                       (w_row / wt.block_rows) * wt.s_stride;
      s_rows[r] = col < n_out ? reinterpret_cast<const unsigned char*>(s) : nullptr;
    }
  }
  __syncthreads();

  const int n_k = (k_dim + k_mma_k - 1) / k_mma_k;
  const auto load_stage = [&](int stage, int k0) {
#pragma unroll
    for (int i = 0; i < k_mma_m * (k_mma_k / 8) / k_mma_threads; ++i) {
      const int c = tid + i * k_mma_threads, r = c / (k_mma_k / 8), col = k0 + (c % (k_mma_k / 8)) * 8;
      const __nv_bfloat16* row = a_rows[r];
      const bool valid = row && col < k_dim;
      flare_cp_async_16(flare_smem_address(&a_s[stage][r][col - k0]), valid ? row + col : a, valid);
    }
    if constexpr (FMT == k_fmt_fp8) {
      // One weight row a thread: its 32 value bytes (k0 is a multiple of 32) and its block's scale.
      static_assert(k_mma_n == k_mma_threads && k_mma_k == 32, "one FP8 row and scale a thread a stage");
      const int r = tid;
      const unsigned char* row = b_rows[r];
      const bool valid = row != nullptr && k0 < k_dim;
      flare_cp_async_16(flare_smem_address(&b_t.values[stage][r][0]), valid ? row + k0 : w_e, valid);
      flare_cp_async_16(flare_smem_address(&b_t.values[stage][r][1]), valid ? row + k0 + 16 : w_e, valid);
      const float* scale = valid ? reinterpret_cast<const float*>(s_rows[r]) + (k0 >> wt.block_cols_log2)
                                 : reinterpret_cast<const float*>(wt.scales);
      flare_cp_async_4(flare_smem_address(&b_t.scales[stage][r]), scale, valid);
    } else if constexpr (FMT == k_fmt_mxfp4) {
      // One weight row a thread (k_mma_n == k_mma_threads): its 16 value bytes (k0 is a multiple
      // of 32, so they are 16-byte aligned) and the aligned 16 bytes holding its scale. Reading
      // from the aligned-down address never leaves the scale's allocation: the 16 bytes lie in one
      // aligned block, and allocations are whole blocks.
      static_assert(k_mma_n == k_mma_threads && k_mma_k == 32, "one MXFP4 row and scale a thread a stage");
      const int r = tid;
      const unsigned char* row = b_rows[r];
      const bool valid = row != nullptr && k0 < k_dim;
      flare_cp_async_16(flare_smem_address(&b_t.values[stage][r]), valid ? row + k0 / 2 : w_e, valid);
      const unsigned char* scale = valid ? s_rows[r] + k0 / 32 : nullptr;
      const unsigned char* scale_block =
          valid ? reinterpret_cast<const unsigned char*>(reinterpret_cast<unsigned long long>(scale) & ~15ull) : w_e;
      flare_cp_async_16(flare_smem_address(&b_t.scales[stage][r]), scale_block, valid);
    } else {
#pragma unroll
      for (int i = 0; i < k_mma_n * (k_mma_k / 8) / k_mma_threads; ++i) {
        const int c = tid + i * k_mma_threads, r = c / (k_mma_k / 8), col = k0 + (c % (k_mma_k / 8)) * 8;
        const unsigned char* row = b_rows[r];
        const bool valid = row && col < k_dim;
        flare_cp_async_16(flare_smem_address(&b_t.b[stage][r][col - k0]), valid ? row + 2 * col : w_e, valid);
      }
    }
  };
  // MXFP4 and FP8: this thread's row of stage `stage` (32 values) decoded into the BF16 slice.
  const auto decode_stage = [&](int stage, int k0) {
    if constexpr (FMT == k_fmt_fp8) {
      const int r = tid;
      const float s = b_t.scales[stage][r] * k_e4m3_unscale;  // zero-filled for rows past the matrix
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // values 16h .. 16h + 15
        const uint4 v = b_t.values[stage][r][h];
        const unsigned words[4] = {v.x, v.y, v.z, v.w};
        __nv_bfloat162 o[8];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float2 lo = flare_e4m3x2<true>(words[q]), hi = flare_e4m3x2<false>(words[q]);
          o[2 * q] = __floats2bfloat162_rn(lo.x * s, lo.y * s);
          o[2 * q + 1] = __floats2bfloat162_rn(hi.x * s, hi.y * s);
        }
        *reinterpret_cast<uint4*>(&b_t.b[0][r][16 * h]) = *reinterpret_cast<const uint4*>(o);
        *reinterpret_cast<uint4*>(&b_t.b[0][r][16 * h + 8]) = *reinterpret_cast<const uint4*>(o + 4);
      }
    } else if constexpr (FMT == k_fmt_mxfp4) {
      const int r = tid;
      const uint4 v = b_t.values[stage][r];
      unsigned e = 0;
      if (b_rows[r] != nullptr) {
        const unsigned long long scale = reinterpret_cast<unsigned long long>(s_rows[r] + k0 / 32);
        e = reinterpret_cast<const unsigned char*>(&b_t.scales[stage][r])[scale & 15];
      }
      const float scale_f = flare_e8m0(e) * k_e2m1_unscale;
      const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // values 8q .. 8q + 7: nibbles 0-7 of word q
        const float2 p0 = flare_e2m1x2<0>(words[q]), p1 = flare_e2m1x2<1>(words[q]);
        const float2 p2 = flare_e2m1x2<2>(words[q]), p3 = flare_e2m1x2<3>(words[q]);
        __nv_bfloat162 o[4] = {__floats2bfloat162_rn(p0.x * scale_f, p1.x * scale_f),
                               __floats2bfloat162_rn(p2.x * scale_f, p3.x * scale_f),
                               __floats2bfloat162_rn(p0.y * scale_f, p1.y * scale_f),
                               __floats2bfloat162_rn(p2.y * scale_f, p3.y * scale_f)};
        *reinterpret_cast<uint4*>(&b_t.b[0][r][8 * q]) = *reinterpret_cast<const uint4*>(o);
      }
    }
  };

  float acc[2][8][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mi][j][q] = 0.0f;
    }
  }

#pragma unroll
  for (int s = 0; s < k_mma_stages - 1; ++s) {
    if (s < n_k) load_stage(s, s * k_mma_k);
    flare_cp_async_commit();
  }
  for (int kt = 0; kt < n_k; ++kt) {
    flare_cp_async_wait<k_mma_stages - 2>();
    __syncthreads();  // stage kt landed for every thread; stage kt - 1 (and the decoded slice) is free
    const int next = kt + k_mma_stages - 1;
    if (next < n_k) load_stage(next % k_mma_stages, next * k_mma_k);
    flare_cp_async_commit();
    const int st = kt % k_mma_stages;
    if constexpr (FMT != k_fmt_bf16) {
      decode_stage(st, kt * k_mma_k);
      __syncthreads();  // the decoded slice is whole
    }
    const int bst = FMT == k_fmt_bf16 ? st : 0;
#pragma unroll
    for (int kk = 0; kk < k_mma_k; kk += 16) {
      unsigned af[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const int r = wm * 32 + mi * 16 + lane % 16, c = kk + (lane / 16) * 8;
        flare_ldmatrix_x4(flare_smem_address(&a_s[st][r][c]), af[mi][0], af[mi][1], af[mi][2], af[mi][3]);
      }
#pragma unroll
      for (int jp = 0; jp < 4; ++jp) {
        const int r = flare_mma_b_row<GATE>(wn, jp) + (lane & 7) + ((lane >> 4) << 3);
        const int c = kk + ((lane >> 3) & 1) * 8;
        unsigned b0, b1, b2, b3;
        flare_ldmatrix_x4(flare_smem_address(&b_t.b[bst][r][c]), b0, b1, b2, b3);
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          flare_mma(acc[mi][2 * jp], af[mi], b0, b1);
          flare_mma(acc[mi][2 * jp + 1], af[mi], b2, b3);
        }
      }
    }
  }
  flare_cp_async_wait<0>();

  // Epilogue: fragment (mi, j) element q is row 16 mi + lane / 4 + 8 (q / 2), column 8 j + 2 (lane % 4) + q % 2.
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wm * 32 + mi * 16 + lane / 4 + 8 * h;
      if (r >= count) continue;
      __nv_bfloat16* dst = out + (long long)(tile.begin + r) * out_stride;
      if (GATE) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int col = n0 + 32 * wn + 8 * j + 2 * (lane % 4);
          if (col >= n_out) continue;
          float g0 = acc[mi][j][2 * h], g1 = acc[mi][j][2 * h + 1];
          float u0 = acc[mi][j + 4][2 * h], u1 = acc[mi][j + 4][2 * h + 1];
          if (ep.bias != nullptr) {
            g0 += ep.bias[col];
            g1 += ep.bias[col + 1];
            u0 += ep.bias[n_out + col];
            u1 += ep.bias[n_out + col + 1];
          }
          const float v0 = flare_moe_act(ep.activation, g0, u0, ep.limit, ep.alpha);
          const float v1 = flare_moe_act(ep.activation, g1, u1, ep.limit, ep.alpha);
          *reinterpret_cast<__nv_bfloat162*>(dst + col) = __floats2bfloat162_rn(v0, v1);
        }
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int col = n0 + 64 * wn + 8 * j + 2 * (lane % 4);
          if (col >= n_out) continue;
          float v0 = acc[mi][j][2 * h], v1 = acc[mi][j][2 * h + 1];
          if (ep.bias != nullptr) {
            v0 += ep.bias[col];
            v1 += ep.bias[col + 1];
          }
          *reinterpret_cast<__nv_bfloat162*>(dst + col) = __floats2bfloat162_rn(v0, v1);
        }
      }
    }
  }
}

// The products' entry points, one signature for both formats (the BF16 ones ignore the scales).
// gate_up: act = activation(x rows @ gate_up[e]^T + bias); down: expert_out = act rows @ down[e]^T + bias.
#define FLARE_MOE_GATE_UP_PARAMS                                                                              \
  const __nv_bfloat16 *x, long long x_stride, const int *sorted_pairs, int top_k, const int *tiles, const void *w, \
      long long w_stride, long long w_expert_stride, const unsigned char *scales, long long s_stride,             \
      long long s_expert_stride, int block_rows, int block_cols_log2, const float *bias, long long bias_expert_stride, int inter, int hidden,          \
      __nv_bfloat16 *act, long long act_stride, int activation, float limit, float alpha
#define FLARE_MOE_DOWN_PARAMS                                                                                   \
  const __nv_bfloat16 *act, long long act_stride, const int *tiles, const void *w, long long w_stride,          \
      long long w_expert_stride, const unsigned char *scales, long long s_stride, long long s_expert_stride,     \
      int block_rows, int block_cols_log2, const float *bias, long long bias_expert_stride, int hidden, int inter, \
      __nv_bfloat16 *expert_out, long long out_stride
#define FLARE_MOE_GATE_UP_ARGS                                                                              \
  x, x_stride, sorted_pairs, top_k, tiles, FlareMoeWeights{w, w_stride, w_expert_stride, scales, s_stride, \
                                                           s_expert_stride, block_rows, block_cols_log2},  \
      FlareMoeEpilogue{bias, activation, limit, alpha}, bias_expert_stride, inter, hidden, act, act_stride
#define FLARE_MOE_DOWN_ARGS                                                                                 \
  act, act_stride, nullptr, 1, tiles, FlareMoeWeights{w, w_stride, w_expert_stride, scales, s_stride,      \
                                                      s_expert_stride, block_rows, block_cols_log2},       \
      FlareMoeEpilogue{bias, 0, 0.0f, 0.0f}, bias_expert_stride, hidden, inter, expert_out, out_stride

extern "C" __global__ void __launch_bounds__(k_mma_threads) flare_moe_experts_mma_gate_up(FLARE_MOE_GATE_UP_PARAMS) {
  flare_moe_mma<true, k_fmt_bf16>(FLARE_MOE_GATE_UP_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_mma_threads) flare_moe_experts_mma_down(FLARE_MOE_DOWN_PARAMS) {
  flare_moe_mma<false, k_fmt_bf16>(FLARE_MOE_DOWN_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_mma_threads)
flare_moe_experts_mma_gate_up_mxfp4(FLARE_MOE_GATE_UP_PARAMS) {
  flare_moe_mma<true, k_fmt_mxfp4>(FLARE_MOE_GATE_UP_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_mma_threads) flare_moe_experts_mma_down_mxfp4(FLARE_MOE_DOWN_PARAMS) {
  flare_moe_mma<false, k_fmt_mxfp4>(FLARE_MOE_DOWN_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_mma_threads) flare_moe_experts_mma_gate_up_fp8(FLARE_MOE_GATE_UP_PARAMS) {
  flare_moe_mma<true, k_fmt_fp8>(FLARE_MOE_GATE_UP_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_mma_threads) flare_moe_experts_mma_down_fp8(FLARE_MOE_DOWN_PARAMS) {
  flare_moe_mma<false, k_fmt_fp8>(FLARE_MOE_DOWN_ARGS);
}

// ---------------------------------------------------------------------------------------------
// Grouped GEMV (decode).

constexpr int k_gemv_threads = 256;  // 8 warps
constexpr int k_gemv_rows = 8;       // tile rows (the host aligns with tile_rows 8)
constexpr int k_gemv_unroll = 8;     // 16-byte chunks per weight row a lane loads before using them

// The dot products of `count` (<= 8) rows of a, a_rows_index[g] (GATE: x rows, the tokens of a
// tile's pairs; else the tile's act rows), with two weight rows of `expert`, rows[0] and rows[1]:
// acc[g][i], F32, summed over the warp, so every lane holds every total.
// A lane's chunks are 16 bytes of a weight row: 8 BF16 values, 32 MXFP4 values (and their scale
// byte), or 16 FP8 values (and their block's scale), so an MXFP4 row streams a quarter of the BF16
// row's bytes and an FP8 row half.
template <int FMT>
__device__ __forceinline__ void flare_moe_gemv_dots(const __nv_bfloat16* __restrict__ a, long long a_stride,
                                                    const int (&a_rows_index)[k_gemv_rows], int count, int expert,
                                                    const FlareMoeWeights& wt, const long long (&rows)[2], int k_dim,
                                                    float (&acc)[k_gemv_rows][2]) {
  const int lane = threadIdx.x % 32;
  constexpr bool MXFP4 = FMT == k_fmt_mxfp4, FP8 = FMT == k_fmt_fp8;
  const int elem_bytes = FMT == k_fmt_bf16 ? 2 : 1;
  const unsigned char* w_e =
      static_cast<const unsigned char*>(wt.w) + (long long)expert * wt.w_expert_stride * elem_bytes;
  const unsigned char* w_rows[2] = {w_e + rows[0] * wt.w_stride * elem_bytes, w_e + rows[1] * wt.w_stride * elem_bytes};
  const unsigned char* s_rows[2] = {nullptr, nullptr};
  if (MXFP4) {
    const unsigned char* s_e = wt.scales + (long long)expert * wt.s_expert_stride;
    s_rows[0] = s_e + rows[0] * wt.s_stride;
    s_rows[1] = s_e + rows[1] * wt.s_stride;
  }
  const float* f_rows[2] = {nullptr, nullptr};  // FP8: each row's scale row
  if (FP8) {
    const float* s_e = reinterpret_cast<const float*>(wt.scales) + (long long)expert * wt.s_expert_stride;
    f_rows[0] = s_e + (rows[0] / wt.block_rows) * wt.s_stride;
    f_rows[1] = s_e + (rows[1] / wt.block_rows) * wt.s_stride;
  }
  const __nv_bfloat16* a_rows[k_gemv_rows];
#pragma unroll
  for (int g = 0; g < k_gemv_rows; ++g) a_rows[g] = a + (long long)a_rows_index[min(g, count - 1)] * a_stride;
#pragma unroll
  for (int g = 0; g < k_gemv_rows; ++g) acc[g][0] = acc[g][1] = 0.0f;

  constexpr int chunk_values = MXFP4 ? 32 : FP8 ? 16 : 8;
  // An MXFP4 chunk holds 4x the values (and their decoded floats), an FP8 one 2x: two chunks in
  // flight keep the registers to two CTAs an SM (FP8 with four: 128 registers and a stack frame).
  constexpr int unroll = MXFP4 ? 2 : FP8 ? 2 : k_gemv_unroll;
  const int n_chunks = k_dim / chunk_values;
  for (int c0 = lane; c0 < n_chunks; c0 += 32 * unroll) {
    uint4 wv[unroll][2];
    float scale[unroll][2];
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      const int c = c0 + 32 * u;
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        wv[u][i] = c < n_chunks ? flare_moe_load_w(w_rows[i] + c * 16) : make_uint4(0, 0, 0, 0);
        if (MXFP4) scale[u][i] = c < n_chunks ? flare_e8m0(__ldg(s_rows[i] + c)) * k_e2m1_unscale : 0.0f;
        if (FP8) {
          scale[u][i] = c < n_chunks ? __ldg(f_rows[i] + ((c * 16) >> wt.block_cols_log2)) * k_e4m3_unscale : 0.0f;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      const int c = c0 + 32 * u;
      if (c >= n_chunks) break;
      if constexpr (MXFP4) {
        float f0[32], f1[32];
        flare_mxfp4_chunk(wv[u][0], f0);
        flare_mxfp4_chunk(wv[u][1], f1);
#pragma unroll
        for (int g = 0; g < k_gemv_rows; ++g) {
          if (g >= count) break;
          const uint4* xp = reinterpret_cast<const uint4*>(a_rows[g] + c * 32);
          const uint4 xv[4] = {__ldg(xp), __ldg(xp + 1), __ldg(xp + 2), __ldg(xp + 3)};
          acc[g][0] = fmaf(flare_dot32(xv, f0), scale[u][0], acc[g][0]);
          acc[g][1] = fmaf(flare_dot32(xv, f1), scale[u][1], acc[g][1]);
        }
      } else if constexpr (FP8) {
        float f0[16], f1[16];
        flare_fp8_chunk(wv[u][0], scale[u][0], f0);
        flare_fp8_chunk(wv[u][1], scale[u][1], f1);
#pragma unroll
        for (int g = 0; g < k_gemv_rows; ++g) {
          if (g >= count) break;
          const uint4* xp = reinterpret_cast<const uint4*>(a_rows[g] + c * 16);
          const uint4 xv[2] = {__ldg(xp), __ldg(xp + 1)};
          acc[g][0] = flare_dot16(xv, f0, acc[g][0]);
          acc[g][1] = flare_dot16(xv, f1, acc[g][1]);
        }
      } else {
#pragma unroll
        for (int g = 0; g < k_gemv_rows; ++g) {
          if (g >= count) break;
          const uint4 xv = __ldg(reinterpret_cast<const uint4*>(a_rows[g] + c * 8));
          const float xf[8] = {flare_lo(xv.x), flare_hi(xv.x), flare_lo(xv.y), flare_hi(xv.y),
                               flare_lo(xv.z), flare_hi(xv.z), flare_lo(xv.w), flare_hi(xv.w)};
          acc[g][0] = flare_dot8(xf, wv[u][0], acc[g][0]);
          acc[g][1] = flare_dot8(xf, wv[u][1], acc[g][1]);
        }
      }
    }
  }
  // Butterfly sums over the rows the tile has (count is the same for the whole warp).
#pragma unroll
  for (int g = 0; g < k_gemv_rows; ++g) {
    if (g >= count) break;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      acc[g][0] += __shfl_xor_sync(0xffffffffu, acc[g][0], o);
      acc[g][1] += __shfl_xor_sync(0xffffffffu, acc[g][1], o);
    }
  }
}

// GATE: warp w of the CTA computes act column blockIdx.x * 8 + w (gate row c and up row n_out + c);
// else columns 2 (blockIdx.x * 8 + w) and the next, of tile blockIdx.y's rows. grid
// (ceil(n_out / (GATE ? 8 : 16)), max tiles).
template <bool GATE, int FMT>
__device__ __forceinline__ void flare_moe_gemv(const __nv_bfloat16* __restrict__ a, long long a_stride,
                                               const int* __restrict__ sorted_pairs, int top_k,
                                               const int* __restrict__ tiles, const FlareMoeWeights& wt,
                                               FlareMoeEpilogue ep, long long bias_expert_stride, int n_out, int k_dim,
                                               __nv_bfloat16* __restrict__ out, long long out_stride) {
  FlareMoeTile tile;
  if (!flare_moe_tile(tiles, tile)) return;
  const int count = min(tile.end - tile.begin, k_gemv_rows);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int col = GATE ? blockIdx.x * (k_gemv_threads / 32) + warp : 2 * (blockIdx.x * (k_gemv_threads / 32) + warp);
  if (col >= n_out) return;
  const long long rows[2] = {col, GATE ? (long long)(n_out + col) : (long long)min(col + 1, n_out - 1)};
  int a_rows_index[k_gemv_rows];
#pragma unroll
  for (int g = 0; g < k_gemv_rows; ++g) {
    const int r = tile.begin + min(g, count - 1);
    a_rows_index[g] = GATE ? sorted_pairs[r] / top_k : r;
  }
  float acc[k_gemv_rows][2];
  flare_moe_gemv_dots<FMT>(a, a_stride, a_rows_index, count, tile.expert, wt, rows, k_dim, acc);
  const float* bias = ep.bias != nullptr ? ep.bias + (long long)tile.expert * bias_expert_stride : nullptr;
#pragma unroll
  for (int g = 0; g < k_gemv_rows; ++g) {  // lane g writes row g
    if (lane != g || g >= count) continue;
    __nv_bfloat16* dst = out + (long long)(tile.begin + g) * out_stride + col;
    float v0 = acc[g][0], v1 = acc[g][1];
    if (bias != nullptr) {
      v0 += bias[rows[0]];
      v1 += bias[rows[1]];
    }
    if (GATE) {
      dst[0] = __float2bfloat16(flare_moe_act(ep.activation, v0, v1, ep.limit, ep.alpha));
    } else {
      dst[0] = __float2bfloat16(v0);
      if (col + 1 < n_out) dst[1] = __float2bfloat16(v1);
    }
  }
}

extern "C" __global__ void __launch_bounds__(k_gemv_threads) flare_moe_experts_gemv_gate_up(FLARE_MOE_GATE_UP_PARAMS) {
  flare_pdl_enter();
  flare_moe_gemv<true, k_fmt_bf16>(FLARE_MOE_GATE_UP_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_gemv_threads) flare_moe_experts_gemv_down(FLARE_MOE_DOWN_PARAMS) {
  flare_pdl_enter();
  flare_moe_gemv<false, k_fmt_bf16>(FLARE_MOE_DOWN_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_gemv_threads, 2)
flare_moe_experts_gemv_gate_up_mxfp4(FLARE_MOE_GATE_UP_PARAMS) {
  flare_pdl_enter();
  flare_moe_gemv<true, k_fmt_mxfp4>(FLARE_MOE_GATE_UP_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_gemv_threads, 2)
flare_moe_experts_gemv_gate_up_fp8(FLARE_MOE_GATE_UP_PARAMS) {
  flare_pdl_enter();
  flare_moe_gemv<true, k_fmt_fp8>(FLARE_MOE_GATE_UP_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_gemv_threads, 2)
flare_moe_experts_gemv_down_mxfp4(FLARE_MOE_DOWN_PARAMS) {
  flare_pdl_enter();
  flare_moe_gemv<false, k_fmt_mxfp4>(FLARE_MOE_DOWN_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_gemv_threads, 2)
flare_moe_experts_gemv_down_fp8(FLARE_MOE_DOWN_PARAMS) {
  flare_pdl_enter();
  flare_moe_gemv<false, k_fmt_fp8>(FLARE_MOE_DOWN_ARGS);
}

// ---------------------------------------------------------------------------------------------
// Fused decode path: steps of at most 32 pairs (a warp's lanes) skip the align kernel and the
// combine kernel. Every warp groups the step's pairs itself in registers (FlareMoeWarpGrouping:
// a handful of warp instructions, the same grouping in every warp), so the step is two launches:
//   flare_moe_experts_fused_gate_up: the GEMV gate_up of tile blockIdx.y of the grouping, grid
//     (ceil(inter / 8), the step's worst-case tile count, as for the GEMV path);
//   flare_moe_experts_fused_down: a CTA per k_fused_down_cols output columns runs the down GEMV of
//     every tile (its warps split the tiles), keeps each pair's bf16-rounded value in shared memory
//     and sums each token's slots in slot order into out: no expert_out rows.
// The grouping: distinct experts in order of their first pair; an expert's rows are its pairs in
// pair order, cut into tiles of up to 8 rows; pairs whose id is outside the experts get no row.

constexpr int k_fused_max_pairs = 32;
constexpr int k_fused_down_threads = 256;
constexpr int k_fused_down_col_pairs = 2;                                                     // warps across columns
constexpr int k_fused_down_tile_groups = k_fused_down_threads / 32 / k_fused_down_col_pairs;  // warps across tiles
constexpr int k_fused_down_cols = 2 * k_fused_down_col_pairs;

// Lane p's view of the grouping of the step's n_pairs (<= 32) pairs: its pair's expert (-1: none)
// and sorted row, and (at the lane of an expert's first pair) the expert's first row and tile.
struct FlareMoeWarpGrouping {
  int expert = -1, row = -1;
  int leader_row0 = 0, leader_tile0 = 0, leader_count = 0;  // meaningful where this lane leads its expert
  bool leads = false;
  int n_tiles = 0;  // the same in every lane
};

__device__ __forceinline__ FlareMoeWarpGrouping flare_moe_warp_grouping(const int* __restrict__ ids,
                                                                        long long ids_stride, int n_pairs,
                                                                        int top_k, int n_experts) {
  const int lane = threadIdx.x % 32;
  FlareMoeWarpGrouping g;
  int e = lane < n_pairs ? ids[(long long)(lane / top_k) * ids_stride + lane % top_k] : -1;
  if (e < 0 || e >= n_experts) e = -1;
  g.expert = e;
  const unsigned same = __match_any_sync(0xffffffffu, e);
  const int leader = __ffs(same) - 1;
  g.leads = e >= 0 && lane == leader;
  const int count = __popc(same);
  // Inclusive scans over the lanes of (rows, tiles) that each expert's first lane brings.
  int rows_incl = g.leads ? count : 0, tiles_incl = g.leads ? (count + k_gemv_rows - 1) / k_gemv_rows : 0;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const int r = __shfl_up_sync(0xffffffffu, rows_incl, o), t = __shfl_up_sync(0xffffffffu, tiles_incl, o);
    if (lane >= o) {
      rows_incl += r;
      tiles_incl += t;
    }
  }
  g.leader_count = g.leads ? count : 0;
  g.leader_row0 = rows_incl - g.leader_count;
  g.leader_tile0 = tiles_incl - (g.leads ? (count + k_gemv_rows - 1) / k_gemv_rows : 0);
  g.n_tiles = __shfl_sync(0xffffffffu, tiles_incl, 31);
  const int row0 = __shfl_sync(0xffffffffu, g.leader_row0, leader);
  g.row = e >= 0 ? row0 + __popc(same & ((1u << lane) - 1u)) : -1;
  return g;
}

// Tile `i` (< g.n_tiles) of the grouping: its expert, its rows [begin, end), and the pair of each of
// its rows (pairs[j] for row begin + j). Every lane of the warp must call it.
__device__ __forceinline__ FlareMoeTile flare_moe_warp_tile(const FlareMoeWarpGrouping& g, int i,
                                                           int (&pairs)[k_gemv_rows]) {
  const int n_tiles_mine = g.leads ? (g.leader_count + k_gemv_rows - 1) / k_gemv_rows : 0;
  const unsigned owner = __ballot_sync(0xffffffffu, g.leads && g.leader_tile0 <= i && i < g.leader_tile0 + n_tiles_mine);
  const int l = __ffs(owner) - 1;
  const int expert = __shfl_sync(0xffffffffu, g.expert, l), row0 = __shfl_sync(0xffffffffu, g.leader_row0, l);
  const int tile0 = __shfl_sync(0xffffffffu, g.leader_tile0, l), count = __shfl_sync(0xffffffffu, g.leader_count, l);
  FlareMoeTile tile;
  tile.expert = expert;
  tile.begin = row0 + (i - tile0) * k_gemv_rows;
  tile.end = min(tile.begin + k_gemv_rows, row0 + count);
#pragma unroll
  for (int j = 0; j < k_gemv_rows; ++j) {
    const unsigned at = __ballot_sync(0xffffffffu, g.row == tile.begin + j);
    pairs[j] = at != 0 ? __ffs(at) - 1 : 0;
  }
  return tile;
}

#define FLARE_MOE_FUSED_GATE_UP_PARAMS                                                                           \
  const __nv_bfloat16 *x, long long x_stride, const int *ids, long long ids_stride, int n_tokens, int top_k,     \
      int n_experts, const void *w, long long w_stride, long long w_expert_stride, const unsigned char *scales,  \
      long long s_stride, long long s_expert_stride, int block_rows, int block_cols_log2, const float *bias,     \
      long long bias_expert_stride, int inter, int hidden, __nv_bfloat16 *act, long long act_stride, int activation, float limit, float alpha
#define FLARE_MOE_FUSED_DOWN_PARAMS                                                                              \
  const __nv_bfloat16 *act, long long act_stride, const int *ids, long long ids_stride, const float *weights,    \
      long long weights_stride, int n_tokens, int top_k, int n_experts, const void *w, long long w_stride,       \
      long long w_expert_stride, const unsigned char *scales, long long s_stride, long long s_expert_stride,     \
      int block_rows, int block_cols_log2, const float *bias, long long bias_expert_stride, int hidden, int inter, \
      __nv_bfloat16 *out, long long out_stride

// Warp w computes act column blockIdx.x * 8 + w of tile blockIdx.y's rows.
template <int FMT>
__device__ __forceinline__ void flare_moe_fused_gate_up(FLARE_MOE_FUSED_GATE_UP_PARAMS) {
  flare_pdl_enter();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const FlareMoeWarpGrouping g = flare_moe_warp_grouping(ids, ids_stride, n_tokens * top_k, top_k, n_experts);
  const int col = blockIdx.x * (k_gemv_threads / 32) + warp;
  if (int(blockIdx.y) >= g.n_tiles || col >= inter) return;
  int pairs[k_gemv_rows];
  const FlareMoeTile tile = flare_moe_warp_tile(g, blockIdx.y, pairs);
  const int count = tile.end - tile.begin;
  int tokens[k_gemv_rows];
#pragma unroll
  for (int j = 0; j < k_gemv_rows; ++j) tokens[j] = pairs[j] / top_k;
  const long long rows[2] = {col, (long long)inter + col};
  float acc[k_gemv_rows][2];
  flare_moe_gemv_dots<FMT>(x, x_stride, tokens, count, tile.expert,
                           FlareMoeWeights{w, w_stride, w_expert_stride, scales, s_stride, s_expert_stride, block_rows,
                                           block_cols_log2},
                           rows, hidden, acc);
  const float* b = bias != nullptr ? bias + (long long)tile.expert * bias_expert_stride : nullptr;
#pragma unroll
  for (int j = 0; j < k_gemv_rows; ++j) {  // lane j writes row j
    if (lane != j || j >= count) continue;
    float gate = acc[j][0], up = acc[j][1];
    if (b != nullptr) {
      gate += b[rows[0]];
      up += b[rows[1]];
    }
    act[(long long)(tile.begin + j) * act_stride + col] = __float2bfloat16(flare_moe_act(activation, gate, up, limit, alpha));
  }
}

template <int FMT>
__device__ __forceinline__ void flare_moe_fused_down(FLARE_MOE_FUSED_DOWN_PARAMS) {
  __shared__ float values[k_fused_max_pairs][k_fused_down_cols];  // bf16-rounded down values, by sorted row
  __shared__ int pair_row[k_fused_max_pairs];
  flare_pdl_enter();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int n_pairs = n_tokens * top_k;
  const FlareMoeWarpGrouping g = flare_moe_warp_grouping(ids, ids_stride, n_pairs, top_k, n_experts);
  if (warp == 0 && lane < n_pairs) pair_row[lane] = g.row;
  const int col_pair = warp % k_fused_down_col_pairs, tile_group = warp / k_fused_down_col_pairs;
  const int col = blockIdx.x * k_fused_down_cols + 2 * col_pair;
  const FlareMoeWeights wt{w, w_stride, w_expert_stride, scales, s_stride, s_expert_stride, block_rows, block_cols_log2};
  if (col < hidden) {
    const long long rows[2] = {col, min(col + 1, hidden - 1)};
    for (int i = tile_group; i < g.n_tiles; i += k_fused_down_tile_groups) {
      int pairs[k_gemv_rows];
      const FlareMoeTile tile = flare_moe_warp_tile(g, i, pairs);
      const int count = tile.end - tile.begin;
      int act_rows[k_gemv_rows];
#pragma unroll
      for (int j = 0; j < k_gemv_rows; ++j) act_rows[j] = tile.begin + min(j, count - 1);
      float acc[k_gemv_rows][2];
      flare_moe_gemv_dots<FMT>(act, act_stride, act_rows, count, tile.expert, wt, rows, inter, acc);
      const float* b = bias != nullptr ? bias + (long long)tile.expert * bias_expert_stride : nullptr;
#pragma unroll
      for (int j = 0; j < k_gemv_rows; ++j) {  // lane j keeps row j
        if (lane != j || j >= count) continue;
        float v0 = acc[j][0], v1 = acc[j][1];
        if (b != nullptr) {
          v0 += b[rows[0]];
          v1 += b[rows[1]];
        }
        values[tile.begin + j][2 * col_pair] = flare_round_bf16(v0);
        values[tile.begin + j][2 * col_pair + 1] = flare_round_bf16(v1);
      }
    }
  }
  __syncthreads();
  // Each token's slots, in slot order (an expert id outside the experts adds nothing).
  for (int i = threadIdx.x; i < n_tokens * k_fused_down_cols; i += k_fused_down_threads) {
    const int t = i / k_fused_down_cols, c = i % k_fused_down_cols, out_col = blockIdx.x * k_fused_down_cols + c;
    if (out_col >= hidden) continue;
    float sum = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      const int row = pair_row[t * top_k + j];
      if (row >= 0) sum += weights[(long long)t * weights_stride + j] * values[row][c];
    }
    out[(long long)t * out_stride + out_col] = __float2bfloat16(sum);
  }
}

#define FLARE_MOE_FUSED_GATE_UP_ARGS                                                                        \
  x, x_stride, ids, ids_stride, n_tokens, top_k, n_experts, w, w_stride, w_expert_stride, scales, s_stride,   \
      s_expert_stride, block_rows, block_cols_log2, bias, bias_expert_stride, inter, hidden, act, act_stride, \
      activation, limit, alpha
#define FLARE_MOE_FUSED_DOWN_ARGS                                                                              \
  act, act_stride, ids, ids_stride, weights, weights_stride, n_tokens, top_k, n_experts, w, w_stride,         \
      w_expert_stride, scales, s_stride, s_expert_stride, block_rows, block_cols_log2, bias, bias_expert_stride, \
      hidden, inter, out, out_stride

extern "C" __global__ void __launch_bounds__(k_gemv_threads)
flare_moe_experts_fused_gate_up(FLARE_MOE_FUSED_GATE_UP_PARAMS) {
  flare_moe_fused_gate_up<k_fmt_bf16>(FLARE_MOE_FUSED_GATE_UP_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_gemv_threads, 2)
flare_moe_experts_fused_gate_up_mxfp4(FLARE_MOE_FUSED_GATE_UP_PARAMS) {
  flare_moe_fused_gate_up<k_fmt_mxfp4>(FLARE_MOE_FUSED_GATE_UP_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_gemv_threads, 2)
flare_moe_experts_fused_gate_up_fp8(FLARE_MOE_FUSED_GATE_UP_PARAMS) {
  flare_moe_fused_gate_up<k_fmt_fp8>(FLARE_MOE_FUSED_GATE_UP_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_fused_down_threads) flare_moe_experts_fused_down(FLARE_MOE_FUSED_DOWN_PARAMS) {
  flare_moe_fused_down<k_fmt_bf16>(FLARE_MOE_FUSED_DOWN_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_fused_down_threads, 2)
flare_moe_experts_fused_down_mxfp4(FLARE_MOE_FUSED_DOWN_PARAMS) {
  flare_moe_fused_down<k_fmt_mxfp4>(FLARE_MOE_FUSED_DOWN_ARGS);
}
extern "C" __global__ void __launch_bounds__(k_fused_down_threads, 2)
flare_moe_experts_fused_down_fp8(FLARE_MOE_FUSED_DOWN_PARAMS) {
  flare_moe_fused_down<k_fmt_fp8>(FLARE_MOE_FUSED_DOWN_ARGS);
}

// ---------------------------------------------------------------------------------------------
// Combine.

constexpr int k_combine_threads = 128;

// grid (n_tokens, ceil(hidden / 8 / k_combine_threads)): a thread per 8 columns of a token.
extern "C" __global__ void __launch_bounds__(k_combine_threads)
flare_moe_experts_combine(const __nv_bfloat16* __restrict__ expert_out, long long eo_stride,  // [pairs, hidden]
                          const int* __restrict__ pair_pos,                                   // [pairs]
                          const float* __restrict__ weights, long long weights_stride,        // [n_tokens, top_k]
                          int top_k, int hidden, __nv_bfloat16* __restrict__ out, long long out_stride) {
  flare_pdl_enter();
  const long long t = blockIdx.x;
  const int c = (blockIdx.y * k_combine_threads + threadIdx.x) * 8;
  if (c >= hidden) return;
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (int j = 0; j < top_k; ++j) {
    const int pos = pair_pos[t * top_k + j];
    if (pos < 0) continue;
    const float wj = weights[t * weights_stride + j];
    const uint4 v = *reinterpret_cast<const uint4*>(expert_out + (long long)pos * eo_stride + c);
    acc[0] += wj * flare_lo(v.x);
    acc[1] += wj * flare_hi(v.x);
    acc[2] += wj * flare_lo(v.y);
    acc[3] += wj * flare_hi(v.y);
    acc[4] += wj * flare_lo(v.z);
    acc[5] += wj * flare_hi(v.z);
    acc[6] += wj * flare_lo(v.w);
    acc[7] += wj * flare_hi(v.w);
  }
  uint4 o;
  __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
  for (int e = 0; e < 4; ++e) o2[e] = __floats2bfloat162_rn(acc[2 * e], acc[2 * e + 1]);
  *reinterpret_cast<uint4*>(out + t * out_stride + c) = o;
}
