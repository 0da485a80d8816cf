// Token sampling on the device with the semantics of src/helios/sampling.cpp (the reference). Each
// logits row [vocab] f32 is sampled by FLARE_CLUSTER CTAs: a thread block cluster on sm_90+ (8), one
// CTA elsewhere. CTA r of a row owns the ids [r * slice, (r + 1) * slice) and, when `slice_in_smem`,
// copies them into shared memory once, so every later pass reads shared memory instead of the
// single SM's trickle of global bandwidth that bounds a CTA-per-row sampler. The CTAs of a row
// combine per-pass sums through distributed shared memory (every CTA reads every CTA's partials in
// rank order, so all take identical decisions) and meet at cluster barriers.
//   1. processed = raw logits + logit bias, then the repetition penalty (prompt and output tokens),
//      then presence and frequency penalties (output tokens): in place in the shared slice, or in
//      the `processed` scratch row when the slice stays in global memory;
//   2. greedy: the first maximum (lowest id), as std::max_element;
//   3. otherwise, in the order "higher processed logit first, ties by lower id" (sigma): keep the
//      top_k, the smallest prefix whose mass reaches top_p, cut where p < min_p, and walk the kept
//      prefix with u * kept (u: Philox4x32-10 of (seed, output index), as sampling_uniform);
//   4. the raw logprob of the token and the top-n raw logprobs (n <= FLARE_SAMPLE_MAX_TOP).
// No sort of the vocabulary: every "where in sigma does a cumulative count or mass cross a target"
// question (top-k, top-p, the draw, top-n) narrows an interval of order keys with passes of 16
// buckets (4 bits of key a pass, so at most 8 passes; a mass question's first pass splits by value
// below the maximum instead) until one element or one key is left; equal keys are ordered by id
// with a counting pass. min-p needs no pass: p grows with the logit, so its
// cut is a binary search over keys. Probabilities are computed as the host does, in double:
// p = exp(double(x) / T - double(max) / T) (the divisions as products with 1 / T).
//
// Exactness against the host: greedy and top-n are identical (pure order). A drawn token differs
// only when u * kept (or top_p) lies within rounding of a cumulative-probability boundary: the
// device adds the same double terms in another order (relative error ~1e-13 of the row's mass), its
// exp may differ from glibc's by one ulp and its x / T by one ulp (a product with 1 / T); a min_p
// cut differs only when a probability is within an ulp or two of min_p.
//
// Scratch for penalized rows: `processed` [n_rows, vocab] f32 (where a slice stays in global
// memory); `marks` [n_rows, vocab] int32 must be all zero on entry and is all zero again on exit
// (each CTA clears the entries its history touched), so the host zeroes it once when it allocates it.
// Defines: FLARE_BLOCK (threads per CTA, a multiple of 32, default 512), FLARE_CLUSTER (CTAs per
// row: 1, or 2..8 on sm_90+, default 1). Dynamic shared memory: slice floats when slice_in_smem.

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
#define FLARE_BLOCK 512
#endif
#ifndef FLARE_CLUSTER
#define FLARE_CLUSTER 1
#endif
#if FLARE_CLUSTER < 1 || FLARE_CLUSTER > 8
#error "sample takes 1..8 CTAs a row"
#endif
#define FLARE_SAMPLE_MAX_TOP 20
#define FLARE_SAMPLE_BUCKETS 16
#define FLARE_SAMPLE_WARPS (FLARE_BLOCK / 32)

typedef unsigned int u32;
typedef unsigned long long u64;

// Per-row parameters; the layout matches SampleRowParams in src/helios/cuda/cuda_sampler.cpp.
struct FlareSampleRow {
  float temperature;
  int top_k;
  float top_p;
  float min_p;
  float presence_penalty;
  float frequency_penalty;
  float repetition_penalty;
  int n_top_logprobs;
  u64 seed;
  u64 output_index;
  int prompt_offset, n_prompt;  // token ids in `tokens` (uploaded when repetition_penalty != 1)
  int output_offset, n_output;  // (uploaded when any penalty is on)
  int bias_offset, n_bias;      // (id, float bits) pairs in `tokens`, stably sorted by id
  int skip;                     // 1: the host samples this row
  int pad;
};

// Per-row result; the layout matches SampleRowResult in cuda_sampler.cpp.
struct FlareSampleResult {
  int token;
  float logprob;
  int n_top;
  int pad;
  int top_ids[FLARE_SAMPLE_MAX_TOP];
  float top_logprobs[FLARE_SAMPLE_MAX_TOP];
};

// ---- Philox4x32-10, the same function as sampling_philox / sampling_uniform on the host.
__device__ double flare_sample_uniform(u64 seed, u64 index) {
  u32 c0 = u32(index), c1 = u32(index >> 32), c2 = 0, c3 = 0;
  u32 k0 = u32(seed), k1 = u32(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const u32 hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const u32 hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const u32 n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  const u64 bits = ((u64(c0) << 32) | c1) >> 11;
  return double(bits) * (1.0 / 9007199254740992.0);
}

// ---- Order keys: unsigned, increasing with the float value, -0 folded onto +0 so that equal
// floats (the host's ties) have equal keys. NaN is not expected.
__device__ __forceinline__ u32 flare_key(float x) {
  u32 u = __float_as_uint(x);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The float of an order key.
__device__ __forceinline__ float flare_value(u32 key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// A prefix of sigma: the elements with key > key, or key == key and id <= id.
struct FlareCut {
  u32 key;
  int id;
};

__device__ __forceinline__ bool flare_in_cut(u32 key, int id, FlareCut c) { return key > c.key || (key == c.key && id <= c.id); }
// a is before b in sigma.
__device__ __forceinline__ bool flare_before(u32 ka, int ia, u32 kb, int ib) { return ka > kb || (ka == kb && ia < ib); }

// How an element weighs in a cumulative question.
enum { FLARE_COUNT = 0, FLARE_MASS = 1 };
struct FlareWeight {
  int mode;
  double temperature;      // as the host: double(float temperature)
  double inv_temperature;  // 1 / temperature
  double max_scaled;       // double(max) * inv_temperature
  double min_p;        // as the host: double(float min_p)
};

// The host divides by the temperature; a product with its reciprocal is the same for 1 and powers of
// two and within an ulp otherwise, at a fraction of a double division's instructions. Rounded
// separately (no fused multiply-add), so the maximum's exponent is exactly 0 and its p exactly 1.
__device__ __forceinline__ double flare_prob(const FlareWeight& w, float x) {
  return exp(__dsub_rn(__dmul_rn(double(x), w.inv_temperature), w.max_scaled));
}

__device__ __forceinline__ double flare_weight(const FlareWeight& w, float x) {
  if (w.mode == FLARE_COUNT) return 1.0;
  return flare_prob(w, x);
}

// ---- The cluster: rank, barrier, and loads and stores of another CTA's shared memory. With one
// CTA a row they are the CTA's own.
__device__ __forceinline__ unsigned flare_rank() {
#if FLARE_CLUSTER > 1
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
#else
  return 0;
#endif
}

// Every thread of every CTA of the row; what each wrote to shared memory before is visible to all
// after.
__device__ __forceinline__ void flare_cluster_sync() {
#if FLARE_CLUSTER > 1
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  __syncthreads();
#endif
}

#if FLARE_CLUSTER > 1
__device__ __forceinline__ u32 flare_map(const void* p, unsigned rank) {
  const u32 local = u32(__cvta_generic_to_shared(p));
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}
#endif

// *p in CTA `rank`'s shared memory (p: the same variable in this CTA's).
__device__ __forceinline__ double flare_ld_f64(const double* p, unsigned rank) {
#if FLARE_CLUSTER > 1
  double v;
  asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(flare_map(p, rank)) : "memory");
  return v;
#else
  return *p;
#endif
}
__device__ __forceinline__ u64 flare_ld_u64(const u64* p, unsigned rank) {
#if FLARE_CLUSTER > 1
  u64 v;
  asm volatile("ld.shared::cluster.u64 %0, [%1];" : "=l"(v) : "r"(flare_map(p, rank)) : "memory");
  return v;
#else
  return *p;
#endif
}
__device__ __forceinline__ int flare_ld_s32(const int* p, unsigned rank) {
#if FLARE_CLUSTER > 1
  int v;
  asm volatile("ld.shared::cluster.s32 %0, [%1];" : "=r"(v) : "r"(flare_map(p, rank)) : "memory");
  return v;
#else
  return *p;
#endif
}
__device__ __forceinline__ void flare_st_s32(int* p, unsigned rank, int v) {
#if FLARE_CLUSTER > 1
  asm volatile("st.shared::cluster.s32 [%0], %1;" ::"r"(flare_map(p, rank)), "r"(v) : "memory");
#else
  *p = v;
#endif
}

struct FlareShared {
  double warp_d[FLARE_SAMPLE_WARPS][FLARE_SAMPLE_BUCKETS];  // a pass's per-warp partials
  int warp_n[FLARE_SAMPLE_WARPS][FLARE_SAMPLE_BUCKETS];
  // What the cluster reads of this CTA, double-buffered by exchange (FlareSlice::round): a CTA
  // writes buffer b of exchange i only after the barrier of exchange i - 1, which every CTA passes
  // only once it has read exchange i - 2 (buffer b too).
  double part_d[2][FLARE_SAMPLE_BUCKETS];
  int part_n[2][FLARE_SAMPLE_BUCKETS];
  u64 part_u64[2][4];
  double part_sum[2];
  int part_count[2];
  // What this CTA read of the cluster's, rank-major.
  double gather_d[FLARE_CLUSTER * FLARE_SAMPLE_BUCKETS];
  int gather_n[FLARE_CLUSTER * FLARE_SAMPLE_BUCKETS];
  u64 gather_u64[FLARE_CLUSTER * 4];
  double gather_sum[FLARE_CLUSTER];
  int gather_count[FLARE_CLUSTER];
  double bucket_d[FLARE_SAMPLE_BUCKETS];  // cluster totals of a narrowing pass
  int bucket_n[FLARE_SAMPLE_BUCKETS];
  double warp_scan[FLARE_SAMPLE_WARPS];
  int warp_count[FLARE_SAMPLE_WARPS];
  u64 warp_u64[FLARE_SAMPLE_WARPS];
  // Broadcast state of the current question.
  u32 lo, hi;
  long long n_in;
  double above;
  double target;
  int found;
  int n_local;
  u32 splits[FLARE_SAMPLE_BUCKETS];  // a pass's bucket boundaries (flare_find)
  int result[2];  // (key bits, id) of a selected element, written by the CTA that owns it
  FlareCut cut;
  // Top logprobs: this CTA's, then (rank 0) the row's, in no order.
  u32 top_keys[FLARE_SAMPLE_MAX_TOP];
  int top_ids[FLARE_SAMPLE_MAX_TOP];
  int all_top[2 * FLARE_SAMPLE_MAX_TOP];  // (key bits, id) pairs
};

// This CTA's share of a row: x[i] is the element of id begin + i, for i < n (shared or global memory).
struct FlareSlice {
  const float* x;
  int begin, n;
  unsigned rank;
  int round;  // cluster exchanges so far (every thread counts them alike)
};

// ---- Block reductions (every thread gets the result; `s` is reusable on return).
__device__ double flare_block_sum(double v, FlareShared& s) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) s.warp_scan[threadIdx.x >> 5] = v;
  __syncthreads();
  double t = 0.0;
  for (int w = 0; w < FLARE_SAMPLE_WARPS; ++w) t += s.warp_scan[w];
  return t;
}

__device__ u64 flare_block_max_u64(u64 v, FlareShared& s) {
  for (int o = 16; o > 0; o >>= 1) {
    const u64 other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) s.warp_u64[threadIdx.x >> 5] = v;
  __syncthreads();
  u64 t = 0;
  for (int w = 0; w < FLARE_SAMPLE_WARPS; ++w) t = s.warp_u64[w] > t ? s.warp_u64[w] : t;
  return t;
}

// Exclusive prefix of `v` over the block's threads in order; *total gets the block's sum.
__device__ int flare_block_scan(int v, FlareShared& s, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int up = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += up;
  }
  __syncthreads();
  if (lane == 31) s.warp_count[warp] = incl;
  __syncthreads();
  int offset = 0, sum = 0;
  for (int w = 0; w < FLARE_SAMPLE_WARPS; ++w) {
    if (w < warp) offset += s.warp_count[w];
    sum += s.warp_count[w];
  }
  *total = sum;
  return offset + incl - v;
}

// ---- Cluster reductions: each CTA's value (the same in all its threads), combined over the
// row's CTAs in rank order, so every CTA gets bit-identical results.
__device__ void flare_cluster_max4(u64 v[4], FlareShared& s, FlareSlice& r) {
  const int b = r.round++ & 1;
  if (threadIdx.x < 4) s.part_u64[b][threadIdx.x] = v[threadIdx.x];
  flare_cluster_sync();
  if (threadIdx.x < 4 * FLARE_CLUSTER) s.gather_u64[threadIdx.x] = flare_ld_u64(&s.part_u64[b][threadIdx.x % 4], threadIdx.x / 4);
  __syncthreads();
  for (int k = 0; k < 4; ++k) {
    u64 m = 0;
    for (int c = 0; c < FLARE_CLUSTER; ++c) m = s.gather_u64[4 * c + k] > m ? s.gather_u64[4 * c + k] : m;
    v[k] = m;
  }
  __syncthreads();
}

__device__ double flare_cluster_sum(double v, FlareShared& s, FlareSlice& r) {
  const int b = r.round++ & 1;
  if (threadIdx.x == 0) s.part_sum[b] = v;
  flare_cluster_sync();
  if (threadIdx.x < FLARE_CLUSTER) s.gather_sum[threadIdx.x] = flare_ld_f64(&s.part_sum[b], threadIdx.x);
  __syncthreads();
  double t = 0.0;
  for (int c = 0; c < FLARE_CLUSTER; ++c) t += s.gather_sum[c];
  __syncthreads();
  return t;
}

// The counts of the CTAs before this one (*total: of all of them).
__device__ int flare_cluster_offset(int v, FlareShared& s, FlareSlice& r, int* total) {
  const int b = r.round++ & 1;
  if (threadIdx.x == 0) s.part_count[b] = v;
  flare_cluster_sync();
  if (threadIdx.x < FLARE_CLUSTER) s.gather_count[threadIdx.x] = flare_ld_s32(&s.part_count[b], threadIdx.x);
  __syncthreads();
  int before = 0, sum = 0;
  for (int c = 0; c < FLARE_CLUSTER; ++c) {
    if (c < int(r.rank)) before += s.gather_count[c];
    sum += s.gather_count[c];
  }
  __syncthreads();
  *total = sum;
  return before;
}

// Calls f(value, id) for each of the slice's elements this thread owns (i = tid + k * FLARE_BLOCK).
// Eight loads are issued before any is used: from global memory one CTA has too few warps to hide
// latency one load at a time.
#define FLARE_SAMPLE_UNROLL 8
template <int kUnroll = FLARE_SAMPLE_UNROLL, typename F>
__device__ __forceinline__ void flare_for_each(const FlareSlice& r, F&& f) {
  for (int base = 0; base < r.n; base += FLARE_BLOCK * kUnroll) {
    float v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * FLARE_BLOCK + int(threadIdx.x);
      if (i < r.n) v[u] = r.x[i];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * FLARE_BLOCK + int(threadIdx.x);
      if (i < r.n) f(v[u], r.begin + i);
    }
  }
}

// One narrowing pass: the cluster's per-bucket weights and counts (s.bucket_d, s.bucket_n) of the
// elements in [lo, hi] within `within`; bucket b holds keys hi - (b+1)*2^shift + 1 .. hi - b*2^shift,
// or with `by_splits` (weights only) the keys from s.splits[b] up to the previous bucket's.
// Counting needs no weights, so it keeps to integers (kCount).
template <bool kCount>
__device__ __noinline__ void flare_bucket_pass(FlareSlice& r, FlareCut within, const FlareWeight& w, u32 lo, u32 hi,
                                               int shift, bool by_splits, FlareShared& s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if constexpr (kCount) {
    // Counts go to the warp's row of s.warp_n by shared atomics, one per group of lanes that
    // share a bucket (predicated adds into 16 registers would cost 16 instructions an element).
    if (lane < FLARE_SAMPLE_BUCKETS) s.warp_n[warp][lane] = 0;
    __syncwarp();
    flare_for_each(r, [&](float v, int id) {
      const u32 k = flare_key(v);
      if (k < lo || k > hi || !flare_in_cut(k, id, within)) return;
      const u32 bucket = (hi - k) >> shift;
      const u32 peers = __match_any_sync(__activemask(), bucket);
      if ((peers & ((1u << lane) - 1u)) == 0) atomicAdd(&s.warp_n[warp][bucket], __popc(peers));
    });
    __syncwarp();
    if (lane < FLARE_SAMPLE_BUCKETS) s.warp_d[warp][lane] = 0.0;
  } else {
    double acc[FLARE_SAMPLE_BUCKETS];
    int cnt[FLARE_SAMPLE_BUCKETS];
    u32 splits[FLARE_SAMPLE_BUCKETS - 1];
#pragma unroll
    for (int b = 0; b < FLARE_SAMPLE_BUCKETS; ++b) {
      acc[b] = 0.0;
      cnt[b] = 0;
      if (b < FLARE_SAMPLE_BUCKETS - 1) splits[b] = s.splits[b];
    }
    flare_for_each<2>(r, [&](float v, int id) {  // few in flight: the double sums need registers
      const u32 k = flare_key(v);
      if (k < lo || k > hi || !flare_in_cut(k, id, within)) return;
      u32 bucket = (hi - k) >> shift;
      if (by_splits) {  // splits are non-increasing: the bucket is how many lie above k
        bucket = 0;
#pragma unroll
        for (int b = 0; b < FLARE_SAMPLE_BUCKETS - 1; ++b) bucket += k < splits[b];
      }
      const double wt = flare_weight(w, v);
#pragma unroll
      for (int b = 0; b < FLARE_SAMPLE_BUCKETS; ++b) {
        if (bucket == u32(b)) {
          acc[b] += wt;
          cnt[b] += 1;
        }
      }
    });
#pragma unroll
    for (int b = 0; b < FLARE_SAMPLE_BUCKETS; ++b) {
      for (int o = 16; o > 0; o >>= 1) {
        acc[b] += __shfl_xor_sync(0xffffffffu, acc[b], o);
        cnt[b] += __shfl_xor_sync(0xffffffffu, cnt[b], o);
      }
    }
    if (lane == 0) {
#pragma unroll
      for (int b = 0; b < FLARE_SAMPLE_BUCKETS; ++b) {
        s.warp_d[warp][b] = acc[b];
        s.warp_n[warp][b] = cnt[b];
      }
    }
  }
  __syncthreads();
  const int buf = r.round++ & 1;
  if (threadIdx.x < FLARE_SAMPLE_BUCKETS) {  // the CTA's totals, warps in order
    double d = 0.0;
    int n = 0;
    for (int v = 0; v < FLARE_SAMPLE_WARPS; ++v) {
      d += s.warp_d[v][threadIdx.x];
      n += s.warp_n[v][threadIdx.x];
    }
    s.part_d[buf][threadIdx.x] = d;
    s.part_n[buf][threadIdx.x] = n;
  }
  flare_cluster_sync();
  if (threadIdx.x < FLARE_SAMPLE_BUCKETS * FLARE_CLUSTER) {
    const int c = threadIdx.x / FLARE_SAMPLE_BUCKETS, b = threadIdx.x % FLARE_SAMPLE_BUCKETS;
    s.gather_d[threadIdx.x] = flare_ld_f64(&s.part_d[buf][b], c);
    s.gather_n[threadIdx.x] = flare_ld_s32(&s.part_n[buf][b], c);
  }
  __syncthreads();
  if (threadIdx.x < FLARE_SAMPLE_BUCKETS) {  // the cluster's totals, CTAs in order
    double d = 0.0;
    int n = 0;
    for (int c = 0; c < FLARE_CLUSTER; ++c) {
      d += s.gather_d[c * FLARE_SAMPLE_BUCKETS + threadIdx.x];
      n += s.gather_n[c * FLARE_SAMPLE_BUCKETS + threadIdx.x];
    }
    s.bucket_d[threadIdx.x] = d;
    s.bucket_n[threadIdx.x] = n;
  }
  __syncthreads();
}

// The mth (1-based) in id order of the row's elements with a key in [lo, hi] within `within`, when
// those are in sigma order by id (one key, or a single element). Threads own contiguous id ranges
// and CTAs contiguous slices, so two scans of counts find it; its owner writes it to every CTA.
__device__ FlareCut flare_select(FlareSlice& r, FlareCut within, u32 lo, u32 hi, long long mth, FlareShared& s) {
  const int per = (r.n + FLARE_BLOCK - 1) / FLARE_BLOCK;
  const int first = min(r.n, int(threadIdx.x) * per), last = min(r.n, first + per);
  const auto matches = [&](int i) {
    const u32 k = flare_key(r.x[i]);
    return k >= lo && k <= hi && flare_in_cut(k, r.begin + i, within);
  };
  int mine = 0;
  for (int i = first; i < last; ++i) mine += matches(i);
  int cta_total = 0, row_total = 0;
  const long long before_thread = flare_block_scan(mine, s, &cta_total);
  const long long before = flare_cluster_offset(cta_total, s, r, &row_total) + before_thread;
  if (before < mth && before + mine >= mth) {
    long long at = before;
    for (int i = first; i < last; ++i) {
      if (matches(i) && ++at == mth) {
        const int key_bits = int(flare_key(r.x[i])), id = r.begin + i;
        for (int c = 0; c < FLARE_CLUSTER; ++c) {
          flare_st_s32(&s.result[0], c, key_bits);
          flare_st_s32(&s.result[1], c, id);
        }
        break;
      }
    }
  }
  flare_cluster_sync();
  const FlareCut result{u32(s.result[0]), s.result[1]};
  __syncthreads();
  return result;
}

// The first element (in sigma, within `within`) whose cumulative weight crosses `target`
// (cum >= target when `inclusive`, else cum > target); the last element of `within` when none
// does. With `fraction`, `target` is a fraction of the total weight of `within`, which the first
// pass sums on the way (the draw's u * kept, top-p's top_p * total) instead of a pass of its own.
// `lo` and `hi` bound the keys of the elements of `within`. *crossed says which.
// Not inlined: five call sites of this body would multiply the compile time.
__device__ __noinline__ FlareCut flare_find(FlareSlice& r, FlareCut within, const FlareWeight& w, double target,
                                            bool inclusive, bool fraction, u32 lo, u32 hi, FlareShared& s,
                                            bool* crossed) {
  const int tid = threadIdx.x;
  if (within.key > lo) lo = within.key;
  if (tid == 0) {
    s.lo = lo;
    s.hi = hi;
    s.n_in = -1;  // unknown before the first pass
    s.above = 0.0;
    s.found = 1;
    s.target = target;
  }
  __syncthreads();
  // Narrow [lo, hi] to the 16th that holds the crossing, until one element or one key remains.
  for (;;) {
    lo = s.lo;
    hi = s.hi;
    const long long n_in = s.n_in;
    if (n_in >= 0 && (n_in <= 1 || lo == hi)) break;
    const u64 width = u64(hi) - lo + 1;
    int shift = 0;
    while ((u64(FLARE_SAMPLE_BUCKETS) << shift) < width) ++shift;
    // The buckets: bucket b is the keys [s.splits[b], s.splits[b - 1]) ([s.splits[0], hi] for b = 0).
    // Equal shares of the key range, except on a mass question's first pass: there probability
    // falls steeply below the maximum and equal key ranges (a binade or more each) leave half the
    // row in the top bucket, so the first pass splits by value at max - c T instead (p = e^-c):
    // the crossing's bucket then holds a few of the row's tokens, not a large share of them.
    const bool by_value = w.mode == FLARE_MASS && n_in < 0;
    if (tid == 0) {
      constexpr double k_value_steps[FLARE_SAMPLE_BUCKETS - 1] = {0.125, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0,
                                                                  4.0,   6.0,  8.0, 12.0, 16.0, 24.0, 40.0};
      const double top = double(flare_value(hi));
      for (int b = 0; b < FLARE_SAMPLE_BUCKETS - 1; ++b) {
        u64 split;
        if (by_value) {
          split = flare_key(float(top - w.temperature * k_value_steps[b]));
        } else {
          const u64 step = u64(b + 1) << shift;
          split = step > u64(hi) - lo ? lo : u64(hi) - step + 1;
        }
        s.splits[b] = u32(max(u64(lo), min(u64(hi), split)));
      }
      s.splits[FLARE_SAMPLE_BUCKETS - 1] = lo;
    }
    __syncthreads();
    if (w.mode == FLARE_COUNT) {
      flare_bucket_pass<true>(r, within, w, lo, hi, shift, false, s);
    } else {
      flare_bucket_pass<false>(r, within, w, lo, hi, shift, by_value, s);
    }
    if (tid == 0) {
      if (fraction && n_in < 0) {  // the first pass saw all of `within`
        double total = 0.0;
        for (int b = 0; b < FLARE_SAMPLE_BUCKETS; ++b) total += s.bucket_d[b];
        s.target = target * total;
      }
      const double goal = s.target;
      double cum = s.above;
      int chosen = -1, last_nonempty = -1;
      double above_chosen = cum;
      for (int b = 0; b < FLARE_SAMPLE_BUCKETS; ++b) {
        const double wb = w.mode == FLARE_COUNT ? double(s.bucket_n[b]) : s.bucket_d[b];
        const int nb = s.bucket_n[b];
        if (nb == 0) continue;
        last_nonempty = b;
        above_chosen = cum;
        const double next = cum + wb;
        if (s.found && (inclusive ? next >= goal : next > goal)) {
          chosen = b;
          break;
        }
        cum = next;
      }
      if (chosen < 0) {  // no crossing: narrow to the last element, which the select returns
        chosen = last_nonempty;
        s.found = 0;
      }
      s.hi = chosen == 0 ? hi : s.splits[chosen - 1] - 1;
      s.lo = s.splits[chosen];
      s.above = above_chosen;
      s.n_in = s.bucket_n[chosen];
    }
    __syncthreads();
  }
  const double above = s.above;
  const long long n_in = s.n_in;
  const bool found = s.found;
  target = s.target;
  __syncthreads();
  // One element left: it is the crossing (or the last element). Several of one key: equal
  // weights, ordered by id; the crossing is the mth of them.
  long long mth = n_in;
  bool hit = false;
  if (n_in == 1) {
    hit = found;
  } else {
    const double weight = flare_weight(w, flare_value(lo));
    if (weight > 0.0 && found) {
      const double need = (target - above) / weight;
      double m_real = inclusive ? ceil(need) : floor(need) + 1.0;
      if (m_real < 1.0) m_real = 1.0;
      if (m_real <= double(n_in)) {
        mth = (long long)m_real;
        hit = true;
      }
    }
  }
  *crossed = hit;
  return flare_select(r, within, lo, hi, mth, s);
}

// Logit bias and penalties, in the host's order, to the ids of this CTA's slice: xw[i] is id
// begin + i. Bias entries come stably sorted by id, so each run of one id is added in request
// order by one thread.
__device__ void flare_apply_penalties(float* xw, int begin, int n, int* marks, const FlareSampleRow& p,
                                      const int* tokens) {
  const int tid = threadIdx.x;
  const auto own = [&](int t) { return t >= begin && t < begin + n; };
  const int* bias = tokens + p.bias_offset;
  for (int e = tid; e < p.n_bias; e += FLARE_BLOCK) {
    const int id = bias[2 * e];
    if (!own(id) || (e > 0 && bias[2 * (e - 1)] == id)) continue;
    float v = xw[id - begin];
    for (int f = e; f < p.n_bias && bias[2 * f] == id; ++f) v = __fadd_rn(v, __int_as_float(bias[2 * f + 1]));
    xw[id - begin] = v;
  }
  __syncthreads();
  const int* prompt = tokens + p.prompt_offset;
  const int* output = tokens + p.output_offset;
  const int n_history = p.n_prompt + p.n_output;
  const int seen_bit = 1 << 30, count_mask = seen_bit - 1;
  if (p.repetition_penalty != 1.0f) {
    for (int h = tid; h < n_history; h += FLARE_BLOCK) {
      const int t = h < p.n_prompt ? prompt[h] : output[h - p.n_prompt];
      if (!own(t)) continue;
      if (atomicOr(&marks[t], seen_bit) & seen_bit) continue;  // another thread has it
      const float v = xw[t - begin];
      xw[t - begin] = v > 0.0f ? __fdiv_rn(v, p.repetition_penalty) : __fmul_rn(v, p.repetition_penalty);
    }
    __syncthreads();
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    for (int h = tid; h < p.n_output; h += FLARE_BLOCK) {
      const int t = output[h];
      if (own(t)) atomicAdd(&marks[t], 1);
    }
    __syncthreads();
    for (int h = tid; h < p.n_output; h += FLARE_BLOCK) {
      const int t = output[h];
      if (!own(t)) continue;
      const int count = atomicAnd(&marks[t], ~count_mask) & count_mask;
      if (count == 0) continue;  // another thread has it
      const float penalty = __fadd_rn(__fmul_rn(p.frequency_penalty, float(count)), p.presence_penalty);
      xw[t - begin] = __fsub_rn(xw[t - begin], penalty);
    }
    __syncthreads();
  }
  for (int h = tid; h < n_history; h += FLARE_BLOCK) {  // leave `marks` all zero
    const int t = h < p.n_prompt ? prompt[h] : output[h - p.n_prompt];
    if (own(t)) marks[t] = 0;
  }
  __syncthreads();
}

// Copies n floats from global `src` to `dst` (shared or global), 16 bytes at a time where both
// are aligned.
__device__ void flare_copy_row(float* dst, const float* src, int n) {
  int start = 0;
  if ((reinterpret_cast<u64>(src) & 15) == 0 && (reinterpret_cast<u64>(dst) & 15) == 0) {
    const int n4 = n >> 2;
    const float4* src4 = reinterpret_cast<const float4*>(src);
    float4* dst4 = reinterpret_cast<float4*>(dst);
    for (int base = 0; base < n4; base += 4 * FLARE_BLOCK) {
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int q = base + u * FLARE_BLOCK + int(threadIdx.x);
        if (q < n4) v[u] = src4[q];
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int q = base + u * FLARE_BLOCK + int(threadIdx.x);
        if (q < n4) dst4[q] = v[u];
      }
    }
    start = n4 << 2;
  }
  for (int i = start + int(threadIdx.x); i < n; i += FLARE_BLOCK) dst[i] = src[i];
  __syncthreads();
}

// grid (n_rows * FLARE_CLUSTER), block FLARE_BLOCK; dynamic shared memory slice * 4 bytes when
// slice_in_smem. `slice` is a multiple of 4.
extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
#if FLARE_CLUSTER > 1
__cluster_dims__(FLARE_CLUSTER, 1, 1)
#endif
flare_sample(const float* __restrict__ logits, long long logits_stride, int vocab,  // [n_rows, vocab] f32
             int slice, int slice_in_smem,
             const FlareSampleRow* __restrict__ rows,                                // [n_rows]
             const int* __restrict__ tokens,                                         // histories and biases
             float* processed, long long processed_stride,                          // scratch [n_rows, vocab]
             int* marks,                                                             // scratch [n_rows, vocab], zero
             FlareSampleResult* __restrict__ results) {                              // [n_rows]
  flare_pdl_enter();
  __shared__ FlareShared s;
  extern __shared__ __align__(16) float s_slice[];
  const int tid = threadIdx.x;
  const int row = blockIdx.x / FLARE_CLUSTER;
  const FlareSampleRow& p = rows[row];  // read on use: a copy would hold 20 registers
  if (p.skip) return;                   // the whole cluster: the row is the same
  const float* raw = logits + row * logits_stride;
  FlareSlice r;
  r.rank = flare_rank();
  r.begin = int(r.rank) * slice;
  r.n = max(0, min(slice, vocab - r.begin));
  r.round = 0;
  const bool penalized = p.n_bias > 0 || p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f ||
                         p.frequency_penalty != 0.0f;
  const int n_top = min(p.n_top_logprobs, min(vocab, FLARE_SAMPLE_MAX_TOP));
  // A plain greedy row reads its slice twice (extremes, then the log-sum-exp): no copy for that.
  slice_in_smem = slice_in_smem && (p.temperature != 0.0f || penalized || n_top > 0);
  r.x = raw + r.begin;
  if (slice_in_smem) {
    flare_copy_row(s_slice, raw + r.begin, r.n);
    r.x = s_slice;
  }

  // Raw max and min keys, then the raw log-sum-exp (float terms, double total).
  u64 raw_stats[4] = {0, 0, 0, 0};
  flare_for_each(r, [&](float v, int) {
    const u32 k = flare_key(v);
    raw_stats[0] = max(raw_stats[0], u64(k));
    raw_stats[1] = max(raw_stats[1], u64(~k));
  });
  raw_stats[0] = flare_block_max_u64(raw_stats[0], s);
  raw_stats[1] = flare_block_max_u64(raw_stats[1], s);
  flare_cluster_max4(raw_stats, s, r);
  const u32 raw_hi = u32(raw_stats[0]), raw_lo = ~u32(raw_stats[1]);
  const float raw_max_value = flare_value(raw_hi);
  float part = 0.0f;
  flare_for_each(r, [&](float v, int) { part += expf(v - raw_max_value); });
  const double lse = double(raw_max_value) + log(flare_cluster_sum(flare_block_sum(double(part), s), s, r));
  const FlareCut everything{0u, 0x7fffffff};

  // Top logprobs, from the raw slice (before penalties rewrite a shared slice): the cut of the
  // n_top best, then each CTA's members of it to rank 0, which orders them.
  FlareSampleResult* result = results + row;
  if (n_top > 0) {
    FlareWeight count;
    count.mode = FLARE_COUNT;
    bool crossed = false;
    const FlareCut top = flare_find(r, everything, count, double(n_top), true, false, raw_lo, raw_hi, s, &crossed);
    if (tid == 0) s.n_local = 0;
    __syncthreads();
    flare_for_each(r, [&](float v, int id) {
      const u32 k = flare_key(v);
      if (!flare_in_cut(k, id, top)) return;
      const int slot = atomicAdd(&s.n_local, 1);
      if (slot < FLARE_SAMPLE_MAX_TOP) {
        s.top_keys[slot] = k;
        s.top_ids[slot] = id;
      }
    });
    __syncthreads();
    const int n_local = min(s.n_local, FLARE_SAMPLE_MAX_TOP);
    int n_row = 0;
    const int before = flare_cluster_offset(n_local, s, r, &n_row);
    if (tid < n_local && before + tid < FLARE_SAMPLE_MAX_TOP) {
      flare_st_s32(&s.all_top[2 * (before + tid)], 0, int(s.top_keys[tid]));
      flare_st_s32(&s.all_top[2 * (before + tid) + 1], 0, s.top_ids[tid]);
    }
    flare_cluster_sync();
    if (r.rank == 0 && tid == 0) {
      const int m = min(n_row, n_top);
      u32 keys[FLARE_SAMPLE_MAX_TOP];
      int ids[FLARE_SAMPLE_MAX_TOP];
      for (int a = 0; a < m; ++a) {  // insertion sort into sigma order
        const u32 k = u32(s.all_top[2 * a]);
        const int id = s.all_top[2 * a + 1];
        int b = a - 1;
        for (; b >= 0 && flare_before(k, id, keys[b], ids[b]); --b) {
          keys[b + 1] = keys[b];
          ids[b + 1] = ids[b];
        }
        keys[b + 1] = k;
        ids[b + 1] = id;
      }
      for (int a = 0; a < m; ++a) {
        result->top_ids[a] = ids[a];
        result->top_logprobs[a] = float(double(flare_value(keys[a])) - lse);
      }
      result->n_top = m;
    }
    __syncthreads();
  } else if (r.rank == 0 && tid == 0) {
    result->n_top = 0;
  }

  // The processed slice: penalties in place in shared memory, or in the scratch row.
  if (penalized) {
    float* xw = s_slice;
    if (!slice_in_smem) {
      xw = processed + row * processed_stride + r.begin;
      flare_copy_row(xw, raw + r.begin, r.n);
      r.x = xw;
    }
    flare_apply_penalties(xw, r.begin, r.n, marks + (long long)row * vocab, p, tokens);
  }

  // Processed max (first maximum) and min keys.
  u64 stats[4] = {0, 0, 0, 0};
  flare_for_each(r, [&](float v, int i) {
    const u32 k = flare_key(v);
    stats[0] = max(stats[0], (u64(k) << 32) | u32(~u32(i)));
    stats[1] = max(stats[1], u64(~k));
  });
  stats[0] = flare_block_max_u64(stats[0], s);
  stats[1] = flare_block_max_u64(stats[1], s);
  flare_cluster_max4(stats, s, r);
  const u32 x_hi = u32(stats[0] >> 32), x_lo = ~u32(stats[1]);
  const int argmax = int(~u32(stats[0]));

  int token = argmax;
  if (p.temperature != 0.0f) {
    FlareWeight w;
    w.temperature = double(p.temperature);
    w.inv_temperature = 1.0 / w.temperature;
    w.max_scaled = __dmul_rn(double(flare_value(x_hi)), w.inv_temperature);
    w.min_p = double(p.min_p);
    bool crossed = false;
    FlareCut kept = everything;
    if (p.top_k > 0 && p.top_k < vocab) {
      w.mode = FLARE_COUNT;
      kept = flare_find(r, everything, w, double(p.top_k), true, false, x_lo, x_hi, s, &crossed);
    }
    w.mode = FLARE_MASS;
    if (p.top_p < 1.0f) {  // the host sums p / total until it reaches top_p; the same up to rounding
      kept = flare_find(r, kept, w, double(p.top_p), true, true, x_lo, x_hi, s, &crossed);
    }
    if (p.min_p > 0.0f) {
      // p grows with the key, so the tokens with p >= min_p are those with a key >= the smallest
      // key that passes: a binary search over keys, no pass over the row. The maximum passes (p = 1).
      if (tid == 0) {
        u32 a = x_lo, b = x_hi;
        while (a < b) {
          const u32 mid = a + (b - a) / 2;
          if (flare_prob(w, flare_value(mid)) >= w.min_p) b = mid;
          else a = mid + 1;
        }
        s.cut = FlareCut{a, 0x7fffffff};
      }
      __syncthreads();
      const FlareCut min_p_cut = s.cut;
      __syncthreads();
      if (flare_in_cut(min_p_cut.key, min_p_cut.id, kept)) kept = min_p_cut;  // the narrower prefix
    }
    const double u = flare_sample_uniform(p.seed, p.output_index);
    token = flare_find(r, kept, w, u, false, true, x_lo, x_hi, s, &crossed).id;  // u * kept
  }

  if (r.rank == 0 && tid == 0) {
    result->token = token;
    result->logprob = float(double(raw[token]) - lse);
  }
  // No CTA may leave while another can still read its shared memory.
  flare_cluster_sync();
}
