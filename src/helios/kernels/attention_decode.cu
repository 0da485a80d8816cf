// Split-KV paged attention for decode steps (every row computes one query token) and verify steps (a
// row computes up to QTOK consecutive tokens: its pending token and drafts), on tensor cores. Cache layout (backend.h): [n_layers][n_pages][2 (k, v)][PAGE_SIZE][n_kv_heads][HEAD_DIM],
// bf16 or fp8 e4m3 (per-tensor scale 1). A position's page is block_tables[row_first_block[row] + pos / PAGE_SIZE].
//
//   flare_attention_decode: grid (n_ctas), block 128. An item is (row, head group, split); items are
//     numbered with the head group fastest, then the split, then the row, and CTA c takes items c,
//     c + n_ctas, ... (the host launches about as many CTAs as fit on the device at once).
//     An item takes GROUP query heads that share one kv head (the whole GQA group when it is <= 16),
//     so each K/V byte is read from memory once per group. Keys are the 16 rows and the GROUP heads
//     the columns (one or two 8-wide n-tiles, columns past GROUP zero) of mma.sync m16n8k16 tiles:
//     with QTOK > 1 (verify rows) the columns are GROUP heads x QTOK query tokens (k_cols = GROUP x
//     QTOK <= 16, column c is head c / QTOK, the row's token c % QTOK), so an item reads its keys
//     once for all of the row's tokens. Query token j of a row of n tokens sees keys up to its own
//     position (the row's length - (n - 1 - j)) and, with a window, none before that position's
//     window: a mask per column. Columns of tokens the row lacks (a row of fewer than QTOK tokens,
//     the decode rows of a mixed step) are zero and write nothing.
//     S^T = K Q^T and O^T += V^T P^T run on tensor cores with F32 accumulation and an online softmax
//     in base 2, as in attention_prefill.cu. With keys as rows, a GQA group of 4 to 8 wastes half a
//     tile or less, where heads as rows (16) would waste three quarters of every mma, and O^T holds
//     HEAD_DIM / 16 tiles instead of HEAD_DIM / 8. Each warp walks its own keys, 16 per iteration
//     (every fourth block of 16 in the split), and the four warps merge in shared memory at the end.
//     Keys come through a cp.async ring in shared memory (below), each thread's fragments in its own
//     column, so reads never conflict. A dot product does not care in which order dims are summed,
//     nor P V in which order keys are, so dims are assigned to fragment slots such that every
//     thread's fragments are whole units of U consecutive dims of a key (U = k_unit_dims: 8 bf16
//     or 16 fp8 dims, 16 bytes; 8 fp8 dims, 8 bytes, at head dim 64):
//       - S^T = K Q^T, k-steps (U/4) p .. (U/4) p + U/4 - 1: the thread (group g, quad t) of the
//         warp supplies dims [4Up + Ut, +U) of keys g and g + 8 (its A rows), one load each, four
//         dims a k-step; Q^T's B fragments use the same dim order.
//       - O^T = V^T P^T: rows g | g + 8 of dim m-tile mt are the thread's dims 2mt | 2mt + 1 of
//         [8Uu + Ug, +U) for each 8U dims u, so the thread needs those dims of each of its four
//         keys (2t, 2t+1, 2t+8, 2t+9 of the 16): one load per key and u, paired into A fragments
//         with byte permutes. P^T's B fragments come from the lanes that hold
//         those keys' scores (two shuffles per fragment register).
//     BF16 pages use the bf16 mma; FP8 pages are converted e4m3 -> f16 (exact, one instruction per
//     pair on sm_89+) and use the f16 mma, Q and P converted to f16 (Q saturated to +-65504).
//     The items depend only on (n_rows, heads, n_splits), never on positions, so a CUDA graph replays
//     the launch for any lengths: each split reads its row's length from `positions` and takes an
//     equal share of the keys (at least k_min_split_keys, rounded to whole CTA iterations of 64), so
//     the first n_live splits have keys and the rest are skipped.
//     A CTA works through its items as one stream: a table of its items (lengths, key ranges) is
//     read once at the start, each warp's copy ring runs on from one item's keys into the next's,
//     the next item's Q is loaded while the current one computes, and each copy's block-table
//     entry is read one copy ahead. With a CTA per item, each paid the dependent reads (position,
//     block table, first page) and the ring's drain: about 5 us, a fifth of a 1024-key item's time
//     on an H200.
//     A row with one live split normalizes and writes `out` itself; otherwise the last live split
//     of a (row, head group) to finish, found with a counter per pair, merges the live splits'
//     partials (log-sum-exp) into `out` and resets the counter for the next launch, which saves a
//     merge kernel per layer.
//     Attention sinks (gpt-oss; `sinks` non-null: one logit per query head): the sink joins each
//     head's softmax denominator once, where the row is normalized (the single live split, or the
//     merge), never in a split's partials, which stay the plain sums over its keys.
// Partials: acc [n_tokens][n_heads][n_splits][HEAD_DIM] f32 (unnormalized, relative to the split's
// maximum), ml [n_tokens][n_heads][n_splits] float2 (maximum score in log2 units, sum of weights; a
// split without keys for a token's column has maximum -inf and sum 0).
// Counters: int [n_rows][n_kv_heads * n_head_groups], zero before the first launch.
// Shared memory (dynamic, k_smem_bytes): the copy ring, then the warps' accumulators of the item
// being merged, apart from the ring so that the next item's copies fly during the merge.
// Targets sm_80+. Defines: HEAD_DIM (64, 128 or 256, required), PAGE_SIZE (tokens per page, required:
// a package's page size is fixed at export), GROUP (query heads per CTA, 1..16, 1..8 at head dim 256,
// default 1), QTOK (query tokens a row computes at most, 1..8, GROUP x QTOK <= 16, <= 8 at head dim
// 256; default 1), KV_FP8 (1: e4m3 pages, default 0), KV_STAGES (iterations in the copy ring; the
// host's choice, which sizes the dynamic shared memory to match). A row's tokens are consecutive in
// the step (row_first_token) and in position.
// Head dim 256 (Gemma 3) is the same code with twice the units a key: a BF16 key is one warp-wide
// copy of 32 units (FP8 two keys a copy, as BF16 at 128), and a thread holds HEAD_DIM / 16 = 16 O^T
// m-tiles a head n-tile, which is why it takes at most 8 heads (one n-tile) an item.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// Programmatic dependent launch (sm_90+, when the host launches with it: by default on sm_90+, off
// with DependentLaunch::off): the next kernel may start launching once every CTA of this one has
// started, and this one waits for the previous kernel to finish (its results, and its reads of what
// this one overwrites) before touching what that kernel writes: Q, the KV pages (the step's new
// keys), the partials and counters. Before the wait it reads only what the host uploaded for the
// step (positions, block tables), which no kernel of the step writes. Both are no-ops for a plain
// launch.
__device__ __forceinline__ void flare_pdl_launch_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void flare_pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

#ifndef HEAD_DIM
#error "attention_decode needs HEAD_DIM"
#endif
#ifndef PAGE_SIZE
#error "attention_decode needs PAGE_SIZE"
#endif
#ifndef GROUP
#define GROUP 1
#endif
#ifndef KV_FP8
#define KV_FP8 0
#endif
#ifndef QTOK
#define QTOK 1
#endif

#if HEAD_DIM != 64 && HEAD_DIM != 128 && HEAD_DIM != 256
#error "attention_decode supports HEAD_DIM 64, 128 and 256"
#endif
#if GROUP < 1 || GROUP > 16
#error "attention_decode takes 1..16 query heads per CTA"
#endif
#if HEAD_DIM == 256 && GROUP > 8
#error "attention_decode takes 1..8 query heads per CTA at head dim 256"
#endif
#if QTOK < 1 || QTOK > 8 || GROUP * QTOK > 16 || (HEAD_DIM == 256 && GROUP * QTOK > 8)
#error "attention_decode takes 1..8 query tokens a row, at most 16 columns (8 at head dim 256)"
#endif

constexpr int k_warps = 4;
constexpr int k_max_splits = 64;  // the host's k_max_decode_splits
// A split takes at least this many keys: short rows use fewer splits (the rest exit at once), so
// a CTA's pipeline has a few iterations to overlap and the merge has fewer partials to read.
constexpr int k_min_split_keys = 128;
constexpr int k_keys_per_warp_iter = 16;                        // one P V k-step
constexpr int k_keys_per_cta_iter = k_keys_per_warp_iter * k_warps;
constexpr int k_ksteps = HEAD_DIM / 16;                         // S = Q K^T k-steps
// A copy unit is 16 bytes of one key: 8 bf16 dims, or 16 fp8 dims at head dim 128. FP8 at head dim
// 64 keeps 8-byte units (8 dims), since a thread holds only 8 V dims of a key there. Wider units
// halve the copy and shared-memory load instructions, which bound the fp8 kernel (it reads half the
// bytes per instruction of the bf16 one).
#if KV_FP8 && HEAD_DIM == 64
constexpr int k_unit_dims = 8;
#elif KV_FP8
constexpr int k_unit_dims = 16;
#else
constexpr int k_unit_dims = 8;
#endif
constexpr int k_k_chunks = HEAD_DIM / (4 * k_unit_dims);        // K units per thread per key
constexpr int k_ksteps_per_chunk = k_unit_dims / 4;              // a thread gives 4 dims a k-step
constexpr int k_k_words = k_unit_dims / 2;                       // operand words per K unit
constexpr int k_dim_mtiles = HEAD_DIM / 16;                     // O^T m-tiles (16 dims each)
constexpr int k_cols = GROUP * QTOK;                             // mma columns: heads x query tokens
constexpr int k_head_ntiles = (k_cols + 7) / 8;                  // S^T / O^T n-tiles (8 columns each)
constexpr int k_threads = 32 * k_warps;

#if KV_FP8
typedef unsigned char kv_t;
#else
typedef __nv_bfloat16 kv_t;
#endif
#if KV_FP8 && HEAD_DIM == 64
typedef uint2 unit_t;  // 8 e4m3 values
#else
typedef uint4 unit_t;  // 8 bf16 or 16 e4m3 values
#endif
static_assert(sizeof(unit_t) == k_unit_dims * sizeof(kv_t), "a unit is k_unit_dims elements");

// The copy pipeline: each thread reads its fragments from its own column of a shared-memory ring
// of k_stages iterations (units of U = k_unit_dims elements, k_units a thread per iteration:
// 2 x k_k_chunks K units, keys g and g + 8, dims [4Up + Ut, +U); k_v_units per V key, dims
// [8Uc + Ug, +U) of four keys), so
// reads are conflict-free and k_stages - 1 iterations of loads are in flight while one computes.
// The warp fills its 32 columns together: one cp.async instruction copies whole consecutive units
// of whole keys (a key's K or V is contiguous), so every L2 request is a full 128-byte line. Copying
// only a thread's own fragments would split each line over two to four requests, and the L2, not
// DRAM, then bounds the kernel. A unit goes to its reader's column XOR a swizzle (flare_swizzle) that
// keeps both the warp's copies and its reads free of bank conflicts. The ring is dynamic shared
// memory of k_smem_bytes, which the host sets (attention_decode_smem_bytes in cuda_attention.cpp).
constexpr int k_v_units = HEAD_DIM / (8 * k_unit_dims);
constexpr int k_units = 2 * k_k_chunks + 4 * k_v_units;
#ifndef KV_STAGES
#define KV_STAGES (KV_FP8 ? 2 : 3)  // the host's choice (attention_decode_stages)
#endif
constexpr int k_stages = KV_STAGES;
constexpr int k_ring_bytes = k_stages * k_units * k_threads * int(sizeof(unit_t));
// After an item's keys, the warps' accumulators [k_warps][k_cols][HEAD_DIM + 4] follow the ring (the
// padding spreads a store's columns over banks).
constexpr int k_acc_stride = HEAD_DIM + 4;
constexpr int k_acc_bytes = k_warps * k_cols * k_acc_stride * 4;
constexpr int k_smem_bytes = k_ring_bytes + k_acc_bytes;
// Items a CTA may take (its table in static shared memory); the host launches at least
// ceil(n_items / k_max_cta_items) CTAs.
constexpr int k_max_cta_items = 128;
// FP8 pages run four CTAs an SM (by registers: with more warps resident the conversions hide the
// loads better than a deeper ring does), so their registers are capped to fit four (up to 8 heads
// a CTA; 16 would spill), and each item loads its own Q (the other CTAs on the SM hide that); the
// others load the next item's Q early. At head dim 256 shared memory, not registers, bounds the
// CTAs an SM (two for FP8, one for BF16), so the registers are not capped.
constexpr int k_min_resident_ctas = KV_FP8 && k_cols <= 8 && HEAD_DIM <= 128 ? 4 : 1;
constexpr bool k_prefetch_q = !KV_FP8;
constexpr int k_key_units = HEAD_DIM / k_unit_dims;                  // units per key, K or V
constexpr int k_keys_per_copy = 32 / k_key_units;                    // keys per warp-wide copy
constexpr int k_copies = k_keys_per_warp_iter / k_keys_per_copy;     // copies per iteration, K or V

// The column of reader lane `lane`'s unit `unit` within its warp's 32: a bijection of lanes for each
// unit that changes only bits the read phase (8 lanes for 16-byte units, 16 for 8-byte ones) keeps
// fixed, so reads stay conflict-free, while the eight or sixteen units one copy phase writes land
// in distinct banks (checked offline for both unit sizes and head dims, except FP8 at head dim 64,
// whose copies keep a few two-way conflicts). FP8 at head dim 128 copies like BF16 at head dim 64
// (8 units a key), so the 16-byte swizzle serves both.
__device__ __forceinline__ int flare_swizzle(int lane, int unit) {
  if constexpr (sizeof(unit_t) == 8) {
    return lane ^ (4 * (unit % 4)) ^ (((lane >> 4) + 2 * (unit % 2)) & 3);
  } else {
    return lane ^ ((lane >> 3) & 3) ^ (4 * (unit & 1));
  }
}
constexpr int k_v_words = k_v_units * int(sizeof(unit_t)) / 4;  // 32-bit words per V key per thread

__device__ __forceinline__ float flare_neg_inf() { return -__int_as_float(0x7f800000); }

// 1 / the softmax denominator of a head whose weights sum to l relative to maximum m (log2 units),
// with its attention sink (a logit in natural units, gpt-oss) joining the denominator once, under
// the larger maximum; the result scales accumulators relative to m. sinks null: 1 / l.
__device__ __forceinline__ float flare_softmax_inv(float m, float l, const float* __restrict__ sinks, int head) {
  if (sinks == nullptr) return 1.0f / l;
  const float sink = sinks[head] * 1.4426950408889634f;
  const float top = fmaxf(m, sink), c = exp2f(m - top);
  return c / (l * c + exp2f(sink - top));
}

// Two e4m3 values (the low 16 bits of `pair`, element 0 lowest) -> packed f16x2, exact. sm_89+
// converts in hardware; before, each byte's exponent and mantissa go into an f16 (bias 15 instead of
// 7, which also keeps subnormals right) scaled by 2^8.
__device__ __forceinline__ unsigned flare_e4m3x2_to_f16x2(unsigned pair) {
#if __CUDA_ARCH__ >= 890
  unsigned h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"((unsigned short)pair));
  return h2;
#else
  const unsigned bits = ((pair & 0x7fu) << 7) | ((pair & 0x80u) << 8) | ((pair & 0x7f00u) << 15) |
                        ((pair & 0x8000u) << 16);
  __half2 h = *reinterpret_cast<const __half2*>(&bits);
  h = __hmul2(h, __floats2half2_rn(256.0f, 256.0f));
  return *reinterpret_cast<const unsigned*>(&h);
#endif
}

// The mma operand type: bf16 pairs for bf16 pages, f16 pairs for fp8 pages.
__device__ __forceinline__ unsigned flare_pack(float lo, float hi) {
#if KV_FP8
  const __half2 v = __floats2half2_rn(fmaxf(-65504.0f, fminf(lo, 65504.0f)), fmaxf(-65504.0f, fminf(hi, 65504.0f)));
#else
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
#endif
  return *reinterpret_cast<const unsigned*>(&v);
}

// Two bf16 (one 32-bit word) -> the operand type.
__device__ __forceinline__ unsigned flare_from_bf16x2(unsigned word) {
#if KV_FP8
  return flare_pack(__uint_as_float(word << 16), __uint_as_float(word & 0xffff0000u));
#else
  return word;
#endif
}

// d += a (16x16, row) * b (16x8, col), f32 accumulators.
__device__ __forceinline__ void flare_mma(float* d, const unsigned* a, unsigned b0, unsigned b1) {
#if KV_FP8
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Through L1 (.ca), so a warp's copies of whole lines reach the L2 as one request per line; the
// L1-bypassing .cg form sends one request per 32-byte sector, which made the L2, not DRAM, the
// bound (ncu on an H200: L2 at 88% of its throughput with DRAM at 51%).
__device__ __forceinline__ void flare_cp_async(unsigned dst, const kv_t* src, bool valid) {
  if constexpr (sizeof(unit_t) == 8) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 8 : 0));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
  }
}
__device__ __forceinline__ void flare_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void flare_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// One unit's raw 32-bit words (bf16 pairs or fp8 quads), into w[0, sizeof(unit_t) / 4).
__device__ __forceinline__ void flare_v_words(const unit_t& raw, unsigned* w) {
  const unsigned* words = reinterpret_cast<const unsigned*>(&raw);
#pragma unroll
  for (int i = 0; i < int(sizeof(unit_t) / 4); ++i) w[i] = words[i];
}

// One K unit (dims [Uc, Uc + U) of one key) as k_k_words operand words (dims 0-1, 2-3, ...).
__device__ __forceinline__ void flare_k_words(const unit_t& raw, unsigned* w) {
#if KV_FP8
  unsigned words[sizeof(unit_t) / 4];
  flare_v_words(raw, words);
#pragma unroll
  for (int i = 0; i < int(sizeof(unit_t) / 4); ++i) {
    w[2 * i] = flare_e4m3x2_to_f16x2(words[i]);
    w[2 * i + 1] = flare_e4m3x2_to_f16x2(words[i] >> 16);
  }
#else
  flare_v_words(raw, w);
#endif
}

// The thread's V dims: local index e (0 .. U k_v_units - 1) of lane group g is this dim.
__device__ __forceinline__ int flare_v_dim(int g, int e) {
  return 8 * k_unit_dims * (e / k_unit_dims) + k_unit_dims * g + e % k_unit_dims;
}

// The operand word of local dim j (flare_v_dim) for keys a (low half) and b (high half).
__device__ __forceinline__ unsigned flare_v_pair(const unsigned* a, const unsigned* b, int j) {
#if KV_FP8
  const unsigned shift = (j % 4);
  return flare_e4m3x2_to_f16x2(__byte_perm(a[j / 4], b[j / 4], shift | ((4 + shift) << 4)));
#else
  return __byte_perm(a[j / 2], b[j / 2], j % 2 ? 0x7632 : 0x5410);
#endif
}

// The last split of a (row, head group) to finish merges them all (every thread of the CTA calls
// this, with the same arguments, after writing its partials): each column (head c / QTOK, token
// first_token + c % QTOK) of the row's n_tok tokens.
__device__ __forceinline__ void flare_merge_splits(__nv_bfloat16* __restrict__ out, long long out_stride,
                                                   float* __restrict__ partial_acc, float2* __restrict__ partial_ml,
                                                   int n_heads, int n_splits, int first_token, int n_tok, int head0,
                                                   int n_live, int* counter, const float* __restrict__ sinks) {
  __shared__ int s_last;
  __threadfence();  // this CTA's partials are visible to whichever CTA merges
  __syncthreads();
  if (threadIdx.x == 0) {
    s_last = atomicAdd(counter, 1) == n_live - 1;
    if (s_last) *counter = 0;  // every split has counted: ready for the next launch
  }
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  // Each live split's weight in the merged softmax per head (normalization folded in), then the
  // weighted sums, 4 dims a thread.
  __shared__ float2 s_ml[k_cols][k_max_splits];
  __shared__ float s_weight[k_cols][k_max_splits];
  const auto token_of = [&](int col) { return (long long)first_token + col % QTOK; };
  for (int e = threadIdx.x; e < k_cols * n_live; e += k_threads) {
    const int col = e / n_live, sp = e % n_live;
    if (col % QTOK >= n_tok) continue;
    s_ml[col][sp] = __ldcg(&partial_ml[(token_of(col) * n_heads + head0 + col / QTOK) * n_splits + sp]);
  }
  __syncthreads();
  if (threadIdx.x < k_cols && int(threadIdx.x) % QTOK < n_tok) {
    const int col = threadIdx.x;
    float total_m = flare_neg_inf();  // finite: some live split holds keys of every column
    for (int i = 0; i < n_live; ++i) total_m = fmaxf(total_m, s_ml[col][i].x);
    float total_l = 0.0f;
    for (int i = 0; i < n_live; ++i) {
      const float2 ml = s_ml[col][i];
      const float weight = exp2f(ml.x - total_m);  // 0 for a split without the column's keys
      s_weight[col][i] = weight;
      total_l += ml.y * weight;
    }
    const float inv_l = flare_softmax_inv(total_m, total_l, sinks, head0 + col / QTOK);  // the sink joins once, here
    for (int i = 0; i < n_live; ++i) s_weight[col][i] *= inv_l;
  }
  __syncthreads();
  for (int e = threadIdx.x; e < k_cols * HEAD_DIM / 4; e += k_threads) {
    const int col = e / (HEAD_DIM / 4), d = (e % (HEAD_DIM / 4)) * 4;
    if (col % QTOK >= n_tok) continue;
    const int h = col / QTOK;
    const float* acc = partial_acc + (token_of(col) * n_heads + head0 + h) * n_splits * HEAD_DIM + d;
    float4 total = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
    for (int i = 0; i < n_live; ++i) {
      const float weight = s_weight[col][i];
      const float4 a = __ldcg(reinterpret_cast<const float4*>(acc + (long long)i * HEAD_DIM));
      total.x += a.x * weight;
      total.y += a.y * weight;
      total.z += a.z * weight;
      total.w += a.w * weight;
    }
    const __nv_bfloat162 lo = __floats2bfloat162_rn(total.x, total.y), hi = __floats2bfloat162_rn(total.z, total.w);
    uint2 packed;
    packed.x = *reinterpret_cast<const unsigned*>(&lo);
    packed.y = *reinterpret_cast<const unsigned*>(&hi);
    *reinterpret_cast<uint2*>(out + token_of(col) * out_stride + (long long)(head0 + h) * HEAD_DIM + d) = packed;
  }
}

// One item's key range and where its row's block table starts; dead items (splits past n_live) have
// begin == end. `first` is the first key of the row's first token (its window), `end` at most the
// row's length (its last token's); first_token and n_tok: the row's tokens in the step.
struct DecodeItem {
  int row, head_group, split, n_live;
  int first, begin, end, first_block;
  int first_token, n_tok, length;
};

// The Q^T of GROUP heads of one row's tokens as B fragments (column g of n-tile nt: column c = 8 nt + g,
// head head0 + c / QTOK of token first_token + c % QTOK; zero past k_cols and the row's n_tok tokens),
// dims in K's order: k-step (U/4) p + j takes dims 4Up + Ut + 4j + {0,1 | 2,3}.
struct QFragments {
  unsigned b[k_head_ntiles][k_ksteps][2];
};
__device__ __forceinline__ void flare_load_q(QFragments& qf, const __nv_bfloat16* __restrict__ q, long long q_stride,
                                             int first_token, int n_tok, int head0, int g, int t) {
#pragma unroll
  for (int nt = 0; nt < k_head_ntiles; ++nt) {
    const int col = 8 * nt + g, h = col / QTOK, j = col % QTOK;
#pragma unroll
    for (int p = 0; p < k_k_chunks; ++p) {
      unsigned words[k_k_words];  // dims [4Up + Ut, +U) as bf16 pairs
#pragma unroll
      for (int c = 0; c < k_k_words / 4; ++c) {
        uint4 raw = make_uint4(0, 0, 0, 0);
        if (col < k_cols && j < n_tok) {
          raw = *reinterpret_cast<const uint4*>(q + (long long)(first_token + j) * q_stride +
                                                (long long)(head0 + h) * HEAD_DIM + 4 * k_unit_dims * p +
                                                k_unit_dims * t + 8 * c);
        }
        words[4 * c] = raw.x;
        words[4 * c + 1] = raw.y;
        words[4 * c + 2] = raw.z;
        words[4 * c + 3] = raw.w;
      }
#pragma unroll
      for (int j = 0; j < k_ksteps_per_chunk; ++j) {
        qf.b[nt][k_ksteps_per_chunk * p + j][0] = flare_from_bf16x2(words[2 * j]);
        qf.b[nt][k_ksteps_per_chunk * p + j][1] = flare_from_bf16x2(words[2 * j + 1]);
      }
    }
  }
}

// grid (n_ctas), block 32 * k_warps; n_ctas >= ceil(n_items / k_max_cta_items).
extern "C" __global__ void __launch_bounds__(32 * k_warps, k_min_resident_ctas)
flare_attention_decode(const __nv_bfloat16* __restrict__ q, long long q_stride,  // [n_rows, n_heads * HEAD_DIM]
                       __nv_bfloat16* __restrict__ out, long long out_stride,    // like q
                       float* __restrict__ partial_acc, float2* __restrict__ partial_ml,
                       const kv_t* __restrict__ cache, int layer, int n_pages, int n_kv_heads,
                       int n_heads, float scale_log2, int sliding_window, int n_splits, int n_rows, int n_tokens,
                       const int* __restrict__ positions, const int* __restrict__ row_first_block,
                       const int* __restrict__ row_first_token,  // [n_rows]: rows' tokens are consecutive
                       const int* __restrict__ block_tables, int* __restrict__ counters,
                       const float* __restrict__ sinks) {  // [n_heads] f32 attention sinks, or null
  flare_pdl_launch_dependents();
  // The copy ring, then the warps' accumulators (k_smem_bytes).
  extern __shared__ __align__(16) unsigned char s_ring[];
  float(*s_acc)[k_cols][k_acc_stride] = reinterpret_cast<float(*)[k_cols][k_acc_stride]>(s_ring + k_ring_bytes);
  __shared__ float s_m[k_warps][k_cols], s_l[k_warps][k_cols];
  __shared__ DecodeItem s_items[k_max_cta_items];
  if (threadIdx.x == 0) {  // a host that sized the ring differently fails the launch, not the math
    unsigned dynamic_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynamic_bytes));
    if (dynamic_bytes < unsigned(k_smem_bytes)) __trap();
  }

  const int group_size = n_heads / n_kv_heads;
  const int n_head_groups = group_size / GROUP;
  const int items_per_row = n_kv_heads * n_head_groups * n_splits;
  const int n_items = items_per_row * n_rows;
  const int n_mine = blockIdx.x < n_items ? (n_items - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x) : 0;
  if (n_mine > k_max_cta_items) __trap();  // the host launches enough CTAs
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // mma fragment coordinates: group (row / key / dim), quad

  // The item table. A split's share of the row's keys [first, length): warps take keys in blocks of
  // 16 aligned to positions (keys before `first` masked), so with pages of a multiple of 16 tokens
  // (the default is 16) a block lies in one page and costs one block-table read. The kv head (group)
  // varies fastest over the items, so the CTAs working together read every kv head of the same
  // slots: whole slot rows of the page rather than one head's slice of many.
  for (int n = threadIdx.x; n < n_mine; n += k_threads) {
    const int item = blockIdx.x + n * gridDim.x;
    DecodeItem it;
    it.row = item / items_per_row;
    it.split = (item % items_per_row) / (n_kv_heads * n_head_groups);
    it.head_group = item % (n_kv_heads * n_head_groups);
    if constexpr (QTOK == 1) {
      it.first_token = it.row;  // one token a row: token t is row t
      it.n_tok = 1;
    } else {
      it.first_token = row_first_token[it.row];
      it.n_tok = (it.row + 1 < n_rows ? row_first_token[it.row + 1] : n_tokens) - it.first_token;
      if (it.n_tok > QTOK) __trap();  // the host routes longer rows to the prefill kernel
    }
    const int length = positions[it.first_token + it.n_tok - 1] + 1;
    it.length = length;
    // The window of the row's first token starts earliest; later tokens mask more (per column).
    it.first = sliding_window > 0 ? max(0, length - (it.n_tok - 1) - sliding_window) : 0;
    const int start = it.first - it.first % k_keys_per_warp_iter;
    int chunk = max((length - start + n_splits - 1) / n_splits, k_min_split_keys);
    chunk = (chunk + k_keys_per_cta_iter - 1) / k_keys_per_cta_iter * k_keys_per_cta_iter;
    it.n_live = (length - start + chunk - 1) / chunk;
    it.begin = min(length, start + it.split * chunk);  // a split past n_live: begin == end
    it.end = min(length, it.begin + chunk);
    it.first_block = row_first_block[it.row];
    s_items[n] = it;
  }
  __syncthreads();

  const int slot_elems = n_kv_heads * HEAD_DIM;
  const long long half_elems = (long long)PAGE_SIZE * slot_elems;
  const long long page_elems = 2 * half_elems;
  const kv_t* layer_base = cache + (long long)layer * n_pages * page_elems;
  // Iteration i of this warp in an item covers keys [begin + 16 warp + 64 i, +16).
  const auto warp_iters = [&](const DecodeItem& it) {
    const int first_base = it.begin + warp * k_keys_per_warp_iter;
    return first_base < it.end ? (it.end - first_base + k_keys_per_cta_iter - 1) / k_keys_per_cta_iter : 0;
  };

  // Copy c of an iteration covers keys [c * k_keys_per_copy, +k_keys_per_copy) of the warp's 16,
  // lane `lane` unit lane % k_key_units of key lane / k_key_units, in K and in V.
  const unsigned warp_ring = unsigned(__cvta_generic_to_shared(s_ring)) + warp * 32 * unsigned(sizeof(unit_t));
  const auto slot = [&](int stage, int unit, int reader) {
    return unsigned((stage * k_units + unit) * k_threads + flare_swizzle(reader, unit)) * unsigned(sizeof(unit_t));
  };
  const int copy_key = lane / k_key_units, copy_unit = lane % k_key_units;
  constexpr bool block_in_page = PAGE_SIZE % k_keys_per_warp_iter == 0;

  // The issue cursor: this warp's next iteration to copy, (item issue_n, iteration issue_i), running
  // up to k_stages - 1 iterations ahead of the computing one, across items. `issued` counts the
  // iterations copied; iteration j of the warp's whole stream lives in ring stage j % k_stages.
  // What the next copy needs is read one copy ahead (the item's fields from the table, and the
  // block-table entry of its first key), so no copy waits on a dependent read.
  int issue_n = 0, issue_i = 0, issued = 0;
  int next_base = 0, next_first = 0, next_end = 0, next_block = 0;
  const int* next_blocks = block_tables;
  const kv_t* next_head_base = layer_base;
  const auto prepare_next = [&]() {
    while (issue_n < n_mine && issue_i >= warp_iters(s_items[issue_n])) {
      ++issue_n;
      issue_i = 0;
    }
    if (issue_n >= n_mine) return;
    const DecodeItem& it = s_items[issue_n];
    next_head_base = layer_base + (long long)(it.head_group / n_head_groups) * HEAD_DIM;
    next_blocks = block_tables + it.first_block;
    next_first = it.first;
    next_end = it.end;
    next_base = it.begin + warp * k_keys_per_warp_iter + issue_i * k_keys_per_cta_iter;
    if (block_in_page) next_block = next_blocks[next_base / PAGE_SIZE];
  };
  const auto issue_next = [&]() {
    if (issue_n >= n_mine) return;
    const kv_t* head_base = next_head_base;
    const int* blocks = next_blocks;
    const int base = next_base, first = next_first, end = next_end;
    const auto key_address = [&](int key) {
      return head_base + (long long)blocks[key / PAGE_SIZE] * page_elems + (long long)(key % PAGE_SIZE) * slot_elems;
    };
    const int stage = issued % k_stages;
    const kv_t* block =
        block_in_page ? head_base + (long long)next_block * page_elems + (long long)(base % PAGE_SIZE) * slot_elems
                      : head_base;
#pragma unroll
    for (int c = 0; c < k_copies; ++c) {
      const int k = c * k_keys_per_copy + copy_key;  // 0..15: K n-tile k / 8, column k % 8
      const bool valid = base + k >= first && base + k < end;
      const kv_t* kp = !valid ? head_base : block_in_page ? block + (long long)k * slot_elems : key_address(base + k);
      // K: reader (g = k % 8, t = unit % 4), unit (k / 8, p = unit / 4).
      flare_cp_async(warp_ring + slot(stage, (k / 8) * k_k_chunks + copy_unit / 4, 4 * (k % 8) + copy_unit % 4),
                     kp + copy_unit * k_unit_dims, valid);
      // V: reader (g = unit % 8, t = (k % 8) / 2), key slot v = k % 2 + 2 (k / 8), 64-dim block unit / 8.
      flare_cp_async(warp_ring + slot(stage, 2 * k_k_chunks + (k % 2 + 2 * (k / 8)) * k_v_units + copy_unit / 8,
                                      4 * (copy_unit % 8) + (k % 8) / 2),
                     kp + half_elems + copy_unit * k_unit_dims, valid);
    }
    ++issue_i;
    ++issued;
    prepare_next();
  };
  const unsigned char* warp_units = s_ring + warp * 32 * sizeof(unit_t);
  const auto unit = [&](int stage, int u) {
    return *reinterpret_cast<const unit_t*>(warp_units + slot(stage, u, lane));
  };

  // A CTA without live items leaves now rather than after the wait, so that its SM is free for the
  // next kernel's early work (at batch 1 most of the splits have no keys).
  bool any_live = false;
  for (int n = 0; n < n_mine; ++n) any_live = any_live || s_items[n].begin < s_items[n].end;
  if (!any_live) return;
  prepare_next();
  flare_pdl_wait();  // what follows reads Q and the new keys, and writes partials
#pragma unroll
  for (int i = 0; i < k_stages - 1; ++i) {
    issue_next();
    flare_cp_async_commit();  // possibly empty: group j always holds iteration j
  }

  // The first live item's Q now; each item loads the next one's while its keys stream.
  const auto next_live = [&](int n) {
    while (n < n_mine && s_items[n].begin >= s_items[n].end) ++n;
    return n;
  };
  const auto head0_of = [&](const DecodeItem& it) {
    return (it.head_group / n_head_groups) * group_size + (it.head_group % n_head_groups) * GROUP;
  };
  int n = next_live(0);
  QFragments qf, q_next;
  const auto load_q = [&](QFragments& f, const DecodeItem& it) {
    flare_load_q(f, q, q_stride, it.first_token, it.n_tok, head0_of(it), g, t);
  };
  if (n < n_mine) load_q(qf, s_items[n]);
  int computed = 0;
  for (; n < n_mine;) {
    const DecodeItem it = s_items[n];
    const int following = next_live(n + 1);
    if (k_prefetch_q && following < n_mine) {
      load_q(q_next, s_items[following]);
    }
    const int split = it.split, n_live = it.n_live, first = it.first, end = it.end;
    const int head0 = head0_of(it);
    // The key range of the thread's S^T columns 2t, 2t + 1 of each n-tile: [col_first, col_end).
    // Token j of the row's n_tok ends n_tok - 1 - j keys before the row; its window starts that
    // much later too. A column past the row's tokens (or k_cols) has none.
    int col_first[k_head_ntiles][2], col_end[k_head_ntiles][2];
#pragma unroll
    for (int nt = 0; nt < k_head_ntiles; ++nt) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int col = 8 * nt + 2 * t + c, back = it.n_tok - 1 - col % QTOK;
        const bool real = col < k_cols && back >= 0;
        const int col_length = it.length - back;
        col_first[nt][c] = QTOK == 1 || sliding_window <= 0 ? first : max(0, col_length - sliding_window);
        col_end[nt][c] = !real ? 0 : QTOK == 1 ? end : min(end, col_length);
      }
    }

    // O^T accumulators: dim m-tile mt, rows g | g + 8 are the thread's dims e = 2 mt | 2 mt + 1 (dim
    // flare_v_dim(g, e)), columns heads 2t, 2t + 1 of n-tile nt. m, l: those two heads (l over the
    // thread's own keys; summed over the warp at the end).
    float o[k_head_ntiles][k_dim_mtiles][4];
    float m[k_head_ntiles][2], l[k_head_ntiles][2];
#pragma unroll
    for (int nt = 0; nt < k_head_ntiles; ++nt) {
#pragma unroll
      for (int mt = 0; mt < k_dim_mtiles; ++mt) o[nt][mt][0] = o[nt][mt][1] = o[nt][mt][2] = o[nt][mt][3] = 0.0f;
      m[nt][0] = m[nt][1] = flare_neg_inf();
      l[nt][0] = l[nt][1] = 0.0f;
    }

    const int n_iters = warp_iters(it);
    const int first_base = it.begin + warp * k_keys_per_warp_iter;
#pragma unroll 1
    for (int i = 0; i < n_iters; ++i, ++computed) {
      __syncwarp();  // every lane is done reading the stage the next copies refill
      issue_next();
      flare_cp_async_commit();
      flare_cp_async_wait<k_stages - 1>();  // this thread's copies of iteration `computed` are in ...
      __syncwarp();                         // ... and so are the other lanes'
      const int base = first_base + i * k_keys_per_cta_iter, stage = computed % k_stages;
      unsigned kw[2][k_k_chunks][k_k_words];  // keys g | g + 8 (rows of S^T), dims [4Up + Ut, +U)
#pragma unroll
      for (int nn = 0; nn < 2; ++nn) {
#pragma unroll
        for (int p = 0; p < k_k_chunks; ++p) flare_k_words(unit(stage, nn * k_k_chunks + p), kw[nn][p]);
      }

      // S^T = K Q^T: rows keys base + g | base + g + 8, columns heads 2t, 2t + 1 of each n-tile.
      float s[k_head_ntiles][4];
#pragma unroll
      for (int nt = 0; nt < k_head_ntiles; ++nt) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int p = 0; p < k_k_chunks; ++p) {
#pragma unroll
          for (int j = 0; j < k_ksteps_per_chunk; ++j) {
            const unsigned a[4] = {kw[0][p][2 * j], kw[1][p][2 * j], kw[0][p][2 * j + 1], kw[1][p][2 * j + 1]};
            const int ks = k_ksteps_per_chunk * p + j;
            flare_mma(s[nt], a, qf.b[nt][ks][0], qf.b[nt][ks][1]);
          }
        }
      }

      // Mask keys outside each column's [col_first, col_end), scale, online softmax per column (max
      // over the 16 keys: the thread's two, then across g).
      unsigned pw[k_head_ntiles][2];  // P as (column 2t, column 2t + 1) pairs: key g | key g + 8
#pragma unroll
      for (int nt = 0; nt < k_head_ntiles; ++nt) {
        float p[4];
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const bool valid_lo = base + g >= col_first[nt][c] && base + g < col_end[nt][c];
          const bool valid_hi = base + g + 8 >= col_first[nt][c] && base + g + 8 < col_end[nt][c];
          const float x_lo = valid_lo ? s[nt][c] * scale_log2 : flare_neg_inf();
          const float x_hi = valid_hi ? s[nt][c + 2] * scale_log2 : flare_neg_inf();
          float tile_max = fmaxf(x_lo, x_hi);
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 4));
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 8));
          tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));
          // One query token a row: finite, every block has a key in [first, end). Several: a
          // column may have seen no key yet (an earlier token, a later window), and then counts
          // from 0 so that its weights stay 0 rather than NaN.
          const float new_m = fmaxf(m[nt][c], tile_max);
          const float ref_m = QTOK > 1 && new_m == flare_neg_inf() ? 0.0f : new_m;
          const float correction = exp2f(m[nt][c] - ref_m);
          m[nt][c] = new_m;
          p[c] = exp2f(x_lo - ref_m);
          p[c + 2] = exp2f(x_hi - ref_m);
          l[nt][c] = l[nt][c] * correction + p[c] + p[c + 2];
#pragma unroll
          for (int mt = 0; mt < k_dim_mtiles; ++mt) {
            o[nt][mt][c] *= correction;
            o[nt][mt][c + 2] *= correction;
          }
        }
        pw[nt][0] = flare_pack(p[0], p[1]);
        pw[nt][1] = flare_pack(p[2], p[3]);
      }

      // O^T += V^T P^T: A = V^T (rows dims, columns keys 2t, 2t + 1 | 2t + 8, 2t + 9), B = P^T
      // (keys x heads): the thread needs head g of keys 2t, 2t + 1 (and + 8), which lanes 8t + g / 2
      // and 8t + 4 + g / 2 hold as half g % 2 of their (2t', 2t' + 1) pairs.
      unsigned vw[4][k_v_words];
#pragma unroll
      for (int v = 0; v < 4; ++v) {
#pragma unroll
        for (int c = 0; c < k_v_units; ++c) {
          flare_v_words(unit(stage, 2 * k_k_chunks + v * k_v_units + c), vw[v] + c * (k_v_words / k_v_units));
        }
      }
      const int src_even = 8 * t + g / 2, src_odd = src_even + 4;
      const unsigned half = g % 2 ? 0x7632u : 0x5410u;  // the pair's high or low 16 bits, twice
#pragma unroll
      for (int nt = 0; nt < k_head_ntiles; ++nt) {
        unsigned b[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const unsigned even = __shfl_sync(0xffffffffu, pw[nt][r], src_even);  // key 2t (+ 8)
          const unsigned odd = __shfl_sync(0xffffffffu, pw[nt][r], src_odd);    // key 2t + 1 (+ 8)
          b[r] = __byte_perm(even, odd, half);
        }
#pragma unroll
        for (int mt = 0; mt < k_dim_mtiles; ++mt) {
          const unsigned a[4] = {flare_v_pair(vw[0], vw[1], 2 * mt), flare_v_pair(vw[0], vw[1], 2 * mt + 1),
                                 flare_v_pair(vw[2], vw[3], 2 * mt), flare_v_pair(vw[2], vw[3], 2 * mt + 1)};
          flare_mma(o[nt][mt], a, b[0], b[1]);
        }
      }
    }

    // The item's merge. The ring keeps the next item's copies in flight meanwhile; the barrier also
    // keeps the previous item's merge readers off the accumulators being overwritten.
    __syncthreads();
    // The thread's l covers its own keys: sum over g. Then merge the warps.
#pragma unroll
    for (int nt = 0; nt < k_head_ntiles; ++nt) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        l[nt][c] += __shfl_xor_sync(0xffffffffu, l[nt][c], 4);
        l[nt][c] += __shfl_xor_sync(0xffffffffu, l[nt][c], 8);
        l[nt][c] += __shfl_xor_sync(0xffffffffu, l[nt][c], 16);
      }
    }
#pragma unroll
    for (int nt = 0; nt < k_head_ntiles; ++nt) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int col = 8 * nt + 2 * t + c;
        if (col >= k_cols) continue;
#pragma unroll
        for (int mt = 0; mt < k_dim_mtiles; ++mt) {
          s_acc[warp][col][flare_v_dim(g, 2 * mt)] = o[nt][mt][c];
          s_acc[warp][col][flare_v_dim(g, 2 * mt + 1)] = o[nt][mt][c + 2];
        }
        if (g == 0) {
          s_m[warp][col] = m[nt][c];
          s_l[warp][col] = l[nt][c];
        }
      }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < k_cols * HEAD_DIM; e += 32 * k_warps) {
      const int col = e / HEAD_DIM, d = e % HEAD_DIM;
      if (col % QTOK >= it.n_tok) continue;  // a token the row lacks
      float total_m = flare_neg_inf();
#pragma unroll
      for (int w = 0; w < k_warps; ++w) total_m = fmaxf(total_m, s_m[w][col]);
      float total_l = 0.0f, total_acc = 0.0f;
#pragma unroll
      for (int w = 0; w < k_warps; ++w) {
        if (s_l[w][col] == 0.0f) continue;  // a warp without keys (its m is -inf)
        const float weight = exp2f(s_m[w][col] - total_m);
        total_l += s_l[w][col] * weight;
        total_acc += s_acc[w][col][d] * weight;
      }
      const int head = head0 + col / QTOK;
      const long long token = (long long)it.first_token + col % QTOK;
      if (n_live == 1) {
        out[token * out_stride + (long long)head * HEAD_DIM + d] =
            __float2bfloat16(total_acc * flare_softmax_inv(total_m, total_l, sinks, head));
      } else {
        // A split without keys of this column writes maximum -inf and sum 0: the merge weighs it 0.
        const long long slot_index = (token * n_heads + head) * n_splits + split;
        partial_acc[slot_index * HEAD_DIM + d] = total_acc;
        if (d == 0) partial_ml[slot_index] = make_float2(total_m, total_l);
      }
    }
    if (n_live > 1) {
      flare_merge_splits(out, out_stride, partial_acc, partial_ml, n_heads, n_splits, it.first_token, it.n_tok, head0,
                         n_live, counters + (long long)it.row * (n_kv_heads * n_head_groups) + it.head_group, sinks);
    }
    n = following;
    if (n >= n_mine) break;
    if constexpr (k_prefetch_q) {
      qf = q_next;
    } else {
      load_q(qf, s_items[n]);
    }
  }
  flare_cp_async_wait<0>();  // only empty groups remain
}
