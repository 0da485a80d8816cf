// Flash-attention style paged attention on tensor cores (mma.sync m16n8k16 BF16, F32 accumulation),
// causal with an optional sliding window, GQA by n_heads / n_kv_heads, for any mix of rows in a step
// (prefill chunks continuing cached tokens, decode rows). A row's query tokens are contiguous in the
// step and have consecutive positions; token_rows is non-decreasing, so a CTA finds its row's tokens
// by binary search and needs no host-built tile list.
// Cache layout (backend.h): [n_layers][n_pages][2 (k, v)][page_size][n_kv_heads][HEAD_DIM], bf16 or
// fp8 e4m3 (per-tensor scale 1; converted to bf16 as tiles enter shared memory).
//
//   flare_attention_prefill: grid (max query tiles of a row, n_heads, n_rows), block 256.
//     A CTA takes 128 query tokens of one row and one head (each warp 16 of them) and walks the row's
//     keys in tiles of 64: S = Q K^T on tensor cores, online softmax in registers (base 2), O += P V.
//     K and V tiles live in shared memory (16-byte chunks XOR-swizzled by key so ldmatrix reads are
//     conflict-free); the next K tile loads (cp.async) while P V runs, the next V tile while Q K^T runs.
//     Head dim 256 (Gemma 3): Q's fragments and O's accumulators would not both fit a thread's
//     registers (64 + 128), so Q waits in shared memory beside the K and V tiles (same swizzle) and
//     its fragments are loaded (ldmatrix) for each K tile; the three tiles (96 KiB) are dynamic shared
//     memory (k_smem_bytes, which the host launches with), and a CTA has four warps (64 query
//     tokens): two CTAs an SM on sm_90, and the three tiles fit the 99 KiB of sm_86/89/120.
// Targets sm_80+. On sm_90, wgmma with TMA-fed tiles and a producer warp would replace mma.sync and
// cp.async and let one CTA cover the GQA group's query heads at once (K/V read once per group).
// Attention sinks (gpt-oss; `sinks` non-null: one logit per query head, natural-log units) join each
// query's softmax denominator at the end and add no value.
// Defines: HEAD_DIM (64, 128 or 256, required), KV_FP8 (1: e4m3 pages, default 0).
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
#error "attention_prefill needs HEAD_DIM"
#endif
#ifndef KV_FP8
#define KV_FP8 0
#endif
#if HEAD_DIM != 64 && HEAD_DIM != 128 && HEAD_DIM != 256
#error "attention_prefill supports HEAD_DIM 64, 128 and 256"
#endif

// 16 query tokens each (at head dim 128, 8 ran 1.2x faster than 4 on H200); 4 at head dim 256, whose
// Q waits in shared memory (above). The host's prefill_warps.
constexpr int k_warps = HEAD_DIM == 256 ? 4 : 8;
constexpr int k_block_m = 16 * k_warps;        // query tokens per CTA
constexpr int k_block_n = 64;                  // keys per tile
constexpr int k_threads = 32 * k_warps;
constexpr int k_chunks = HEAD_DIM / 8;         // 16-byte bf16 chunks per key row
constexpr int k_ksteps = HEAD_DIM / 16;        // mma k-steps over the head dim
constexpr int k_key_ntiles = k_block_n / 8;    // S columns in mma n-tiles of 8 keys
constexpr int k_dim_ntiles = HEAD_DIM / 8;     // O columns in n-tiles of 8 dims
#if HEAD_DIM == 256
constexpr int k_tile_bytes = k_block_n * HEAD_DIM * 2;                      // a K or V tile, bf16
constexpr int k_smem_bytes = 2 * k_tile_bytes + k_block_m * HEAD_DIM * 2;  // with Q: the host's launch
#endif

#if KV_FP8
typedef unsigned char kv_t;
#else
typedef __nv_bfloat16 kv_t;
#endif

__device__ __forceinline__ float flare_neg_inf() { return -__int_as_float(0x7f800000); }

// Byte offset of 16-byte chunk `chunk` of key row `key` in a [k_block_n][HEAD_DIM] bf16 tile.
__device__ __forceinline__ unsigned flare_tile_offset(int key, int chunk) {
  return unsigned(key * HEAD_DIM * 2 + ((chunk ^ (key & 7)) * 16));
}

__device__ __forceinline__ unsigned flare_smem_address(const void* p) {
  return unsigned(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void flare_ldmatrix_x4(unsigned address, unsigned& r0, unsigned& r1, unsigned& r2,
                                                  unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(address));
}

__device__ __forceinline__ void flare_ldmatrix_x4_trans(unsigned address, unsigned& r0, unsigned& r1, unsigned& r2,
                                                        unsigned& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(address));
}

// d += a (16x16 bf16, row) * b (16x8 bf16, col), f32 accumulators.
__device__ __forceinline__ void flare_mma(float* d, const unsigned* a, unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned flare_pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}

__device__ __forceinline__ void flare_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void flare_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

#if KV_FP8
// Two e4m3 values (the low 16 bits of `pair`, element 0 lowest) -> two packed bf16, exact (see
// attention_decode.cu).
__device__ __forceinline__ unsigned flare_e4m3x2_to_bf16x2(unsigned int pair) {
  float x0, x1;
#if __CUDA_ARCH__ >= 890
  unsigned int h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((unsigned short)pair));
  asm("{ .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.f32.f16 %0, lo;\n cvt.f32.f16 %1, hi; }"
      : "=f"(x0), "=f"(x1) : "r"(h2));
#else
  x0 = __uint_as_float(((pair & 0x7fu) << 20) | ((pair & 0x80u) << 24)) * 1.329227995784916e36f;  // 2^120
  x1 = __uint_as_float(((pair & 0x7f00u) << 12) | ((pair & 0x8000u) << 16)) * 1.329227995784916e36f;
#endif
  return flare_pack_bf16(x0, x1);
}
#endif

// Loads keys [key0, key0 + 64) of one kv head (K or V half of the page) into a swizzled bf16 tile;
// keys outside [key_begin, length) become zeros: their pages may not exist or hold stale bytes, and
// a zero V keeps the masked 0 * V finite.
__device__ __forceinline__ void flare_load_tile(unsigned char* tile, const kv_t* head_base, const int* blocks,
                                                int key0, int key_begin, int length, int page_size,
                                                long long page_elems, int slot_elems) {
#if KV_FP8
  // 16 e4m3 bytes (two bf16 chunks) per load, converted on the way in.
  for (int i = threadIdx.x; i < k_block_n * k_chunks / 2; i += k_threads) {
    const int key = i / (k_chunks / 2), pair = i % (k_chunks / 2), position = key0 + key;
    uint4 raw = make_uint4(0, 0, 0, 0);
    if (position >= key_begin && position < length) {
      raw = *reinterpret_cast<const uint4*>(head_base + (long long)blocks[position / page_size] * page_elems +
                                            (long long)(position % page_size) * slot_elems + pair * 16);
    }
    const unsigned int w[4] = {raw.x, raw.y, raw.z, raw.w};
    unsigned packed[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) packed[j] = flare_e4m3x2_to_bf16x2(w[j / 2] >> (16 * (j % 2)));
    *reinterpret_cast<uint4*>(tile + flare_tile_offset(key, 2 * pair)) =
        make_uint4(packed[0], packed[1], packed[2], packed[3]);
    *reinterpret_cast<uint4*>(tile + flare_tile_offset(key, 2 * pair + 1)) =
        make_uint4(packed[4], packed[5], packed[6], packed[7]);
  }
#else
  for (int i = threadIdx.x; i < k_block_n * k_chunks; i += k_threads) {
    const int key = i / k_chunks, chunk = i % k_chunks, position = key0 + key;
    const bool valid = position >= key_begin && position < length;
    const kv_t* src = valid ? head_base + (long long)blocks[position / page_size] * page_elems +
                                  (long long)(position % page_size) * slot_elems + chunk * 8
                            : head_base;
    // Through L1 (.ca): a warp's copies then reach L2 as whole-line requests; the L1-bypassing .cg
    // form sends one request per 32-byte sector (see attention_decode.cu).
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                     flare_smem_address(tile + flare_tile_offset(key, chunk))),
                 "l"(src), "r"(valid ? 16 : 0));
  }
#endif
  flare_cp_async_commit();
}

// First index in sorted a[0, n) not below value.
__device__ __forceinline__ int flare_lower_bound(const int* a, int n, int value) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (a[mid] < value) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// grid (max query tiles of a row, n_heads, n_rows), block 32 * k_warps.
extern "C" __global__ void __launch_bounds__(k_threads)
flare_attention_prefill(const __nv_bfloat16* __restrict__ q, long long q_stride,  // [n_tokens, n_heads * HEAD_DIM]
                        __nv_bfloat16* __restrict__ out, long long out_stride,    // like q
                        const kv_t* __restrict__ cache, int layer, int n_pages, int page_size, int n_kv_heads,
                        int n_tokens, int n_heads, float scale_log2, int sliding_window,
                        const int* __restrict__ positions, const int* __restrict__ token_rows,
                        const int* __restrict__ row_first_block, const int* __restrict__ block_tables,
                        const float* __restrict__ sinks) {  // [n_heads] f32 attention sinks, or null
  flare_pdl_enter();
#if HEAD_DIM == 256
  // The K tile, the V tile, then the CTA's Q [k_block_m][HEAD_DIM] (k_smem_bytes).
  extern __shared__ __align__(128) unsigned char s_tiles[];
  unsigned char* const s_k = s_tiles;
  unsigned char* const s_v = s_tiles + k_tile_bytes;
  unsigned char* const s_q = s_tiles + 2 * k_tile_bytes;
  if (threadIdx.x == 0) {  // a host that sized the tiles differently fails the launch, not the math
    unsigned dynamic_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynamic_bytes));
    if (dynamic_bytes < unsigned(k_smem_bytes)) __trap();
  }
#else
  __shared__ __align__(128) unsigned char s_k[k_block_n * HEAD_DIM * 2];
  __shared__ __align__(128) unsigned char s_v[k_block_n * HEAD_DIM * 2];
#endif

  const int row = blockIdx.z, head = blockIdx.y;
  const int row_begin = flare_lower_bound(token_rows, n_tokens, row);
  const int row_end = flare_lower_bound(token_rows, n_tokens, row + 1);
  const int t0 = row_begin + blockIdx.x * k_block_m;
  if (t0 >= row_end) return;  // the whole CTA: this row has fewer tiles
  const int n_q = min(k_block_m, row_end - t0);
  const int first_position = positions[t0], last_position = positions[t0 + n_q - 1];
  const int length = last_position + 1;  // keys this tile can see: [key_begin, length)
  const int key_begin = sliding_window > 0 ? max(0, first_position - sliding_window + 1) : 0;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;  // mma fragment coordinates

  // This thread's two query rows (mma rows `group` and `group + 8` of the warp's 16).
  const int qi[2] = {warp * 16 + group, warp * 16 + group + 8};
  int qpos[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) qpos[r] = qi[r] < n_q ? positions[t0 + qi[r]] : -1;  // -1: sees no key

#if HEAD_DIM == 256
  // Q [n_q][HEAD_DIM] into s_q (rows past n_q zero), swizzled like the K tiles; the copies join the
  // first K tile's group, so the first wait for K covers them.
  const __nv_bfloat16* q_base = q + (long long)t0 * q_stride + (long long)head * HEAD_DIM;
  if (((reinterpret_cast<unsigned long long>(q) | (unsigned long long)q_stride * 2) & 15) == 0) {
    for (int i = threadIdx.x; i < k_block_m * k_chunks; i += k_threads) {
      const int r = i / k_chunks, chunk = i % k_chunks;
      const __nv_bfloat16* src = r < n_q ? q_base + (long long)r * q_stride + chunk * 8 : q;
      asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                       flare_smem_address(s_q + flare_tile_offset(r, chunk))),
                   "l"(src), "r"(r < n_q ? 16 : 0));
    }
  } else {  // a view whose rows are not 16-byte aligned: element loads (once per CTA)
    for (int i = threadIdx.x; i < k_block_m * k_chunks; i += k_threads) {
      const int r = i / k_chunks, chunk = i % k_chunks;
      unsigned words[4] = {0, 0, 0, 0};
      if (r < n_q) {
        const __nv_bfloat16* src = q_base + (long long)r * q_stride + chunk * 8;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const __nv_bfloat162 pair = __halves2bfloat162(src[2 * j], src[2 * j + 1]);
          words[j] = *reinterpret_cast<const unsigned*>(&pair);
        }
      }
      *reinterpret_cast<uint4*>(s_q + flare_tile_offset(r, chunk)) = make_uint4(words[0], words[1], words[2], words[3]);
    }
  }
#else
  // Q fragments (A operand, row-major 16 x HEAD_DIM), straight from global memory once.
  unsigned qa[k_ksteps][4];
#pragma unroll
  for (int ks = 0; ks < k_ksteps; ++ks) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const __nv_bfloat16* qp = q + (long long)(t0 + min(qi[r], n_q - 1)) * q_stride + (long long)head * HEAD_DIM;
      const int c = ks * 16 + quad * 2;
      const __nv_bfloat162 lo = __halves2bfloat162(qp[c], qp[c + 1]);
      const __nv_bfloat162 hi = __halves2bfloat162(qp[c + 8], qp[c + 9]);
      qa[ks][r] = *reinterpret_cast<const unsigned*>(&lo);
      qa[ks][r + 2] = *reinterpret_cast<const unsigned*>(&hi);
    }
  }
#endif

  float o[k_dim_ntiles][4];
#pragma unroll
  for (int n = 0; n < k_dim_ntiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {flare_neg_inf(), flare_neg_inf()}, l[2] = {0.0f, 0.0f};

  const int kv_head = head / (n_heads / n_kv_heads);
  const int slot_elems = n_kv_heads * HEAD_DIM;
  const long long half_elems = (long long)page_size * slot_elems;
  const long long page_elems = 2 * half_elems;
  const kv_t* k_base = cache + (long long)layer * n_pages * page_elems + (long long)kv_head * HEAD_DIM;
  const kv_t* v_base = k_base + half_elems;
  const int* blocks = block_tables + row_first_block[row];

  const int first_tile = key_begin / k_block_n * k_block_n;
  flare_load_tile(s_k, k_base, blocks, first_tile, key_begin, length, page_size, page_elems, slot_elems);
  flare_load_tile(s_v, v_base, blocks, first_tile, key_begin, length, page_size, page_elems, slot_elems);

  for (int key0 = first_tile; key0 < length; key0 += k_block_n) {
    const bool has_next = key0 + k_block_n < length;
    flare_cp_async_wait<1>();  // this K tile (the V tile may still be in flight)
    __syncthreads();

    // S = Q K^T: 16 x 64 per warp. B fragments are K rows: ldmatrix (no transpose), 8 keys x 32 dims.
    float s[k_key_ntiles][4];
#if HEAD_DIM == 256
    // Q's A fragments of two k-steps at a time from s_q (ldmatrix: 16 rows x 16 dims each), then every
    // key n-tile's; each s[n] sums its k-steps in the same order as the register path.
#pragma unroll
    for (int n = 0; n < k_key_ntiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int p = 0; p < k_ksteps / 2; ++p) {
      unsigned qa[2][4];
      const int q_row = warp * 16 + lane % 8 + 8 * ((lane / 8) % 2);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        flare_ldmatrix_x4(flare_smem_address(s_q + flare_tile_offset(q_row, 4 * p + 2 * j + lane / 16)), qa[j][0],
                          qa[j][1], qa[j][2], qa[j][3]);
      }
#pragma unroll
      for (int n = 0; n < k_key_ntiles; ++n) {
        unsigned b0, b1, b2, b3;
        flare_ldmatrix_x4(flare_smem_address(s_k + flare_tile_offset(n * 8 + lane % 8, p * 4 + lane / 8)), b0, b1, b2,
                          b3);
        flare_mma(s[n], qa[0], b0, b1);
        flare_mma(s[n], qa[1], b2, b3);
      }
    }
#else
#pragma unroll
    for (int n = 0; n < k_key_ntiles; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int p = 0; p < k_ksteps / 2; ++p) {
        unsigned b0, b1, b2, b3;
        flare_ldmatrix_x4(flare_smem_address(s_k + flare_tile_offset(n * 8 + lane % 8, p * 4 + lane / 8)), b0, b1, b2,
                          b3);
        flare_mma(s[n], qa[2 * p], b0, b1);
        flare_mma(s[n], qa[2 * p + 1], b2, b3);
      }
    }
#endif
    __syncthreads();  // every warp is done with this K tile
    if (has_next) {
      flare_load_tile(s_k, k_base, blocks, key0 + k_block_n, key_begin, length, page_size, page_elems, slot_elems);
    }

    // Mask (causal, window), scale, and the online softmax of this thread's two rows.
    const bool needs_mask = key0 + k_block_n - 1 > first_position ||
                            (sliding_window > 0 && key0 < last_position - sliding_window + 1);
    float tile_max[2] = {flare_neg_inf(), flare_neg_inf()};
#pragma unroll
    for (int n = 0; n < k_key_ntiles; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e / 2, key = key0 + n * 8 + quad * 2 + e % 2;
        float x = s[n][e] * scale_log2;
        if (needs_mask && (key > qpos[r] || (sliding_window > 0 && key <= qpos[r] - sliding_window))) {
          x = flare_neg_inf();
        }
        s[n][e] = x;
        tile_max[r] = fmaxf(tile_max[r], x);
      }
    }
    float correction[2], base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float new_m = fmaxf(m[r], tile_max[r]);
      base[r] = new_m == flare_neg_inf() ? 0.0f : new_m;  // a row with no key yet: every weight is 0
      correction[r] = exp2f(m[r] - base[r]);
      m[r] = new_m;
      l[r] *= correction[r];
    }
#pragma unroll
    for (int n = 0; n < k_dim_ntiles; ++n) {
      o[n][0] *= correction[0];
      o[n][1] *= correction[0];
      o[n][2] *= correction[1];
      o[n][3] *= correction[1];
    }
    // P as A fragments: the accumulators of key n-tiles 2k and 2k+1 are the A layout of k-step k.
    unsigned pa[k_block_n / 16][4];
#pragma unroll
    for (int n = 0; n < k_key_ntiles; ++n) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[e] = exp2f(s[n][e] - base[e / 2]);
        l[e / 2] += p[e];
      }
      pa[n / 2][(n % 2) * 2] = flare_pack_bf16(p[0], p[1]);
      pa[n / 2][(n % 2) * 2 + 1] = flare_pack_bf16(p[2], p[3]);
    }

    if (has_next) flare_cp_async_wait<1>(); else flare_cp_async_wait<0>();  // this V tile
    __syncthreads();
    // O += P V: B fragments are V^T, ldmatrix.trans of 16 keys x 16 dims gives two dim n-tiles.
#pragma unroll
    for (int ks = 0; ks < k_block_n / 16; ++ks) {
#pragma unroll
      for (int d = 0; d < HEAD_DIM / 16; ++d) {
        unsigned b0, b1, b2, b3;
        flare_ldmatrix_x4_trans(
            flare_smem_address(s_v + flare_tile_offset(ks * 16 + lane % 8 + 8 * ((lane / 8) % 2), 2 * d + lane / 16)),
            b0, b1, b2, b3);
        flare_mma(o[2 * d], pa[ks], b0, b1);
        flare_mma(o[2 * d + 1], pa[ks], b2, b3);
      }
    }
    __syncthreads();  // every warp is done with this V tile
    if (has_next) {
      flare_load_tile(s_v, v_base, blocks, key0 + k_block_n, key_begin, length, page_size, page_elems, slot_elems);
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (qi[r] >= n_q) continue;
    float inv = 1.0f / l[r];
    if (sinks != nullptr) {  // the sink joins the denominator under the larger maximum (m is finite: a query sees itself)
      const float sink = sinks[head] * 1.4426950408889634f;
      const float top = fmaxf(m[r], sink), c = exp2f(m[r] - top);
      inv = c / (l[r] * c + exp2f(sink - top));
    }
    __nv_bfloat16* op = out + (long long)(t0 + qi[r]) * out_stride + (long long)head * HEAD_DIM;
#pragma unroll
    for (int n = 0; n < k_dim_ntiles; ++n) {
      const int c = n * 8 + quad * 2;
      op[c] = __float2bfloat16(o[n][2 * r] * inv);
      op[c + 1] = __float2bfloat16(o[n][2 * r + 1] * inv);
    }
  }
}
