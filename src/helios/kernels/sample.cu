// Token sampling on the device with the semantics of src/helios/sampling.cpp (the reference), one
// CTA per logits row [vocab] f32:
//   1. processed = raw logits + logit bias, then the repetition penalty (prompt and output tokens),
//      then presence and frequency penalties (output tokens), in a scratch row (skipped, reading the
//      raw row, when the row has none of them);
//   2. greedy: the first maximum (lowest id), as std::max_element;
//   3. otherwise, in the order "higher processed logit first, ties by lower id" (sigma): keep the
//      top_k, the smallest prefix whose mass reaches top_p, cut where p < min_p, and walk the kept
//      prefix with u * kept (u: Philox4x32-10 of (seed, output index), as sampling_uniform);
//   4. the raw logprob of the token and the top-n raw logprobs (n <= FLARE_SAMPLE_MAX_TOP).
// No sort of the vocabulary: every "where in sigma does a cumulative count or mass cross a target"
// question (top-k, top-p, the draw, top-n) is answered by narrowing an interval of order keys with
// block reductions over 16 buckets per pass (4 bits of key per pass, so at most 8 passes, and most
// rows need 2-4; each pass's survivors are compacted so the next reads only them), until at most
// FLARE_SAMPLE_CAP candidates are left; those are sorted in shared memory and scanned exactly.
// min-p needs no pass: p grows with the logit, so its cut is a binary search over keys. Probabilities are computed as the host does, in double:
// p = exp(double(x) / T - double(max) / T).
//
// Exactness against the host: greedy and top-n are identical (pure order). A drawn token differs
// only when u * kept (or top_p) lies within rounding of a cumulative-probability boundary: the
// device adds the same double terms in another order (relative error ~1e-13 of the row's mass) and
// its exp may differ from glibc's by one ulp; a min_p cut differs only when a probability is within
// an ulp of min_p.
//
// Scratch: `processed` [n_rows, vocab] f32, `marks` [n_rows, vocab] int32 and `lists`
// [n_rows, 2, vocab] (value, id) pairs (the candidates each narrowing pass keeps). `marks` must be
// all zero on entry and is all zero again on exit (each row clears the entries its history
// touched), so the host zeroes it once when it allocates it.
// Defines: FLARE_BLOCK (threads per CTA, a multiple of 32, default 512).

// Programmatic dependent launch (sm_90+, when the host launches with it: FLARE_CUDA_PDL=1): the next
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
#define FLARE_SAMPLE_MAX_TOP 20
#define FLARE_SAMPLE_CAP (2 * FLARE_BLOCK)
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
  double temperature;  // as the host: double(float temperature)
  double max_scaled;   // double(max) / temperature
  double min_p;        // as the host: double(float min_p)
};

__device__ __forceinline__ double flare_prob(const FlareWeight& w, float x) { return exp(double(x) / w.temperature - w.max_scaled); }

__device__ __forceinline__ double flare_weight(const FlareWeight& w, float x) {
  if (w.mode == FLARE_COUNT) return 1.0;
  const double p = flare_prob(w, x);
  return p;
}

struct FlareShared {
  u32 keys[FLARE_SAMPLE_CAP];  // the finish's candidates
  int ids[FLARE_SAMPLE_CAP];
  double warp_d[FLARE_SAMPLE_WARPS][FLARE_SAMPLE_BUCKETS];
  int warp_n[FLARE_SAMPLE_WARPS][FLARE_SAMPLE_BUCKETS];
  double bucket_d[FLARE_SAMPLE_BUCKETS];  // block totals of a narrowing pass
  int bucket_n[FLARE_SAMPLE_BUCKETS];
  double warp_scan[FLARE_SAMPLE_WARPS];
  int warp_count[FLARE_SAMPLE_WARPS];
  u64 warp_u64[FLARE_SAMPLE_WARPS];
  // Broadcast state of the current question.
  u32 lo, hi;
  long long n_in;
  double above;
  double target;
  int n_found;
  int n_list;
  int found;
  FlareCut cut;
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

// The elements a narrowing pass reads: the row itself (ids are indices) or a compacted list of
// (value bits, id) pairs in scratch.
struct FlareSource {
  const float* row;
  const int2* list;  // null: read `row`
  int n;
};

__device__ __forceinline__ void flare_get(const FlareSource& src, int i, float& v, int& id) {
  if (src.list) {
    const int2 e = src.list[i];
    v = __int_as_float(e.x);
    id = e.y;
  } else {
    v = src.row[i];
    id = i;
  }
}

// Calls f(value, id) for each of the source's elements this thread owns. Eight loads are issued
// before any is used: one CTA per row has too few warps to hide memory latency one load at a time.
#define FLARE_SAMPLE_UNROLL 8
template <int kVectors = 4, typename F>
__device__ __forceinline__ void flare_for_each(const FlareSource& src, F&& f) {
  int start = 0;
  if (!src.list && (reinterpret_cast<u64>(src.row) & 15) == 0) {  // an aligned row: float4 loads
    const float4* row4 = reinterpret_cast<const float4*>(src.row);
    const int n4 = src.n >> 2;
    for (int base = 0; base < n4; base += FLARE_BLOCK * kVectors) {
      float4 v[kVectors];
#pragma unroll
      for (int u = 0; u < kVectors; ++u) {
        const int q = base + u * FLARE_BLOCK + int(threadIdx.x);
        if (q < n4) v[u] = row4[q];
      }
#pragma unroll
      for (int u = 0; u < kVectors; ++u) {
        const int q = base + u * FLARE_BLOCK + int(threadIdx.x);
        if (q < n4) {
          f(v[u].x, 4 * q);
          f(v[u].y, 4 * q + 1);
          f(v[u].z, 4 * q + 2);
          f(v[u].w, 4 * q + 3);
        }
      }
    }
    start = n4 << 2;
  }
  for (int base = start; base < src.n; base += FLARE_BLOCK * FLARE_SAMPLE_UNROLL) {
    float v[FLARE_SAMPLE_UNROLL];
    int id[FLARE_SAMPLE_UNROLL];
#pragma unroll
    for (int u = 0; u < FLARE_SAMPLE_UNROLL; ++u) {
      const int i = base + u * FLARE_BLOCK + int(threadIdx.x);
      id[u] = -1;
      if (i < src.n) flare_get(src, i, v[u], id[u]);
    }
#pragma unroll
    for (int u = 0; u < FLARE_SAMPLE_UNROLL; ++u) {
      if (id[u] >= 0) f(v[u], id[u]);
    }
  }
}

// One narrowing pass: each warp's per-bucket weights and counts (s.warp_d, s.warp_n) of the
// source's elements in [lo, hi] within `within`; bucket b holds keys hi - (b+1)*2^shift + 1 .. hi - b*2^shift.
// Counting needs no weights, so it keeps to integers (kCount).
template <bool kCount>
__device__ __noinline__ void flare_bucket_pass(FlareSource src, FlareCut within, const FlareWeight& w, u32 lo, u32 hi,
                                               int shift, FlareShared& s) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if constexpr (kCount) {
    // Counts go to the warp's row of s.warp_n by shared atomics, one per group of lanes that
    // share a bucket (predicated adds into 16 registers would cost 16 instructions an element).
    if (lane < FLARE_SAMPLE_BUCKETS) s.warp_n[warp][lane] = 0;
    __syncwarp();
    flare_for_each<4>(src, [&](float v, int id) {
      const u32 k = flare_key(v);
      if (k < lo || k > hi || !flare_in_cut(k, id, within)) return;
      const u32 bucket = (hi - k) >> shift;
      const u32 peers = __match_any_sync(__activemask(), bucket);
      if ((peers & ((1u << lane) - 1u)) == 0) atomicAdd(&s.warp_n[warp][bucket], __popc(peers));
    });
    __syncwarp();
    if (lane < FLARE_SAMPLE_BUCKETS) s.warp_d[warp][lane] = double(s.warp_n[warp][lane]);
  } else {
    double acc[FLARE_SAMPLE_BUCKETS];
    int cnt[FLARE_SAMPLE_BUCKETS];
#pragma unroll
    for (int b = 0; b < FLARE_SAMPLE_BUCKETS; ++b) {
      acc[b] = 0.0;
      cnt[b] = 0;
    }
    flare_for_each<1>(src, [&](float v, int id) {  // few in flight: the double sums need registers
      const u32 k = flare_key(v);
      if (k < lo || k > hi || !flare_in_cut(k, id, within)) return;
      const u32 bucket = (hi - k) >> shift;
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
}

// Copies the source's elements in [lo, hi] within `within` to `dst` (in no particular order);
// returns how many.
__device__ int flare_compact(FlareSource src, FlareCut within, u32 lo, u32 hi, int2* dst, FlareShared& s) {
  const int lane = threadIdx.x & 31;
  if (threadIdx.x == 0) s.n_list = 0;
  __syncthreads();
  for (int base = 0; base < src.n; base += FLARE_BLOCK * FLARE_SAMPLE_UNROLL) {
    float v[FLARE_SAMPLE_UNROLL];
    int id[FLARE_SAMPLE_UNROLL];
#pragma unroll
    for (int u = 0; u < FLARE_SAMPLE_UNROLL; ++u) {  // the loads first, as flare_for_each
      const int i = base + u * FLARE_BLOCK + int(threadIdx.x);
      id[u] = -1;
      if (i < src.n) flare_get(src, i, v[u], id[u]);
    }
#pragma unroll
    for (int u = 0; u < FLARE_SAMPLE_UNROLL; ++u) {
      bool keep = false;
      if (id[u] >= 0) {
        const u32 k = flare_key(v[u]);
        keep = k >= lo && k <= hi && flare_in_cut(k, id[u], within);
      }
      const u32 ballot = __ballot_sync(0xffffffffu, keep);
      int warp_base = 0;
      if (lane == 0 && ballot) warp_base = atomicAdd(&s.n_list, __popc(ballot));
      warp_base = __shfl_sync(0xffffffffu, warp_base, 0);
      if (keep) dst[warp_base + __popc(ballot & ((1u << lane) - 1u))] = make_int2(__float_as_int(v[u]), id[u]);
    }
  }
  __syncthreads();
  const int n = s.n_list;
  __syncthreads();
  return n;
}

// The first element (in sigma, within `within`) whose cumulative weight crosses `target`
// (cum >= target when `inclusive`, else cum > target); the last element of `within` when none
// does. With `fraction`, `target` is a fraction of the total weight of `within`, which the first
// pass sums on the way (the draw's u * kept, top-p's top_p * total) instead of a pass of its own. `lo` and `hi` bound the keys of the elements of `within`; `lists` is [2, n] scratch for
// the candidates of each level. *crossed says which.
// Not inlined: five call sites of this body would quadruple the compile time.
__device__ __noinline__ FlareCut flare_find(const float* x, int n, FlareCut within, const FlareWeight& w, double target,
                                            bool inclusive, bool fraction, u32 lo, u32 hi, int2* lists,
                                            FlareShared& s, bool* crossed) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (within.key > lo) lo = within.key;
  if (tid == 0) {
    s.lo = lo;
    s.hi = hi;
    s.n_in = -1;  // unknown before the first pass
    s.above = 0.0;
    s.found = 1;
    s.cut = FlareCut{lo, 0x7fffffff};
    s.target = target;
  }
  __syncthreads();
  FlareSource src{x, nullptr, n};
  int level = 0;
  // Narrow [lo, hi] to the 16th that holds the crossing, until few candidates or one key remain;
  // after each pass the survivors are compacted, so later passes read only them.
  for (;;) {
    lo = s.lo;
    hi = s.hi;
    const long long n_in = s.n_in;
    if (n_in >= 0 && (n_in <= FLARE_SAMPLE_CAP || lo == hi)) break;
    if (n_in >= 0) {
      int2* dst = lists + (level & 1) * (long long)n;
      src = FlareSource{x, dst, flare_compact(src, within, lo, hi, dst, s)};
      ++level;
    }
    const u64 width = u64(hi) - lo + 1;
    int shift = 0;
    while ((u64(FLARE_SAMPLE_BUCKETS) << shift) < width) ++shift;
    if (w.mode == FLARE_COUNT) {
      flare_bucket_pass<true>(src, within, w, lo, hi, shift, s);
    } else {
      flare_bucket_pass<false>(src, within, w, lo, hi, shift, s);
    }
    if (tid < FLARE_SAMPLE_BUCKETS) {  // one thread per bucket sums the warps' partials
      double wb = 0.0;
      int nb = 0;
      for (int v = 0; v < FLARE_SAMPLE_WARPS; ++v) {
        wb += s.warp_d[v][tid];
        nb += s.warp_n[v][tid];
      }
      s.bucket_d[tid] = wb;
      s.bucket_n[tid] = nb;
    }
    __syncthreads();
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
        const double wb = s.bucket_d[b];
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
      if (chosen < 0) {  // no crossing: narrow to the last element, which the finish returns
        chosen = last_nonempty;
        s.found = 0;
      }
      const int n_chosen = s.bucket_n[chosen];
      const u64 new_hi = u64(hi) - (u64(chosen) << shift);
      const u64 span = (u64(1) << shift) - 1;
      s.hi = u32(new_hi);
      s.lo = new_hi - lo > span ? u32(new_hi - span) : lo;
      s.above = above_chosen;
      s.n_in = n_chosen;
    }
    __syncthreads();
  }
  const double above = s.above;
  const long long n_in = s.n_in;
  target = s.target;
  if (n_in <= FLARE_SAMPLE_CAP) {
    // Gather the candidates, sort them in sigma order, scan their weights.
    if (tid == 0) s.n_found = 0;
    __syncthreads();
    flare_for_each(src, [&](float v, int id) {
      const u32 k = flare_key(v);
      if (k < lo || k > hi || !flare_in_cut(k, id, within)) return;
      const int slot = atomicAdd(&s.n_found, 1);
      s.keys[slot] = k;
      s.ids[slot] = id;
    });
    __syncthreads();
    const int m = s.n_found;
    for (int j = m + tid; j < FLARE_SAMPLE_CAP; j += FLARE_BLOCK) {  // padding sorts last
      s.keys[j] = 0;
      s.ids[j] = 0x7fffffff;
    }
    __syncthreads();
    for (int size = 2; size <= FLARE_SAMPLE_CAP; size <<= 1) {
      for (int stride = size >> 1; stride > 0; stride >>= 1) {
        for (int j = tid; j < FLARE_SAMPLE_CAP; j += FLARE_BLOCK) {
          const int partner = j ^ stride;
          if (partner > j) {
            const bool ascending = (j & size) == 0;  // "ascending" = sigma order
            const bool partner_first = flare_before(s.keys[partner], s.ids[partner], s.keys[j], s.ids[j]);
            if (partner_first == ascending) {
              const u32 tk = s.keys[j];
              s.keys[j] = s.keys[partner];
              s.keys[partner] = tk;
              const int ti = s.ids[j];
              s.ids[j] = s.ids[partner];
              s.ids[partner] = ti;
            }
          }
        }
        __syncthreads();
      }
    }
    // Each thread scans two consecutive candidates; a block scan gives each pair its offset.
    const int j0 = 2 * tid, j1 = 2 * tid + 1;
    const double w0 = j0 < m ? flare_weight(w, x[s.ids[j0]]) : 0.0;
    const double w1 = j1 < m ? flare_weight(w, x[s.ids[j1]]) : 0.0;
    double incl = w0 + w1;
    for (int o = 1; o < 32; o <<= 1) {
      const double up = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += up;
    }
    if (lane == 31) s.warp_scan[warp] = incl;
    if (tid == 0) s.n_found = 0x7fffffff;  // reused: the first crossing index
    __syncthreads();
    double offset = above;
    for (int v = 0; v < warp; ++v) offset += s.warp_scan[v];
    const double before = offset + incl - (w0 + w1);
    const double c0 = before + w0, c1 = c0 + w1;
    int first = 0x7fffffff;
    if (j0 < m && (inclusive ? c0 >= target : c0 > target)) first = j0;
    else if (j1 < m && (inclusive ? c1 >= target : c1 > target)) first = j1;
    if (first != 0x7fffffff) atomicMin(&s.n_found, first);
    __syncthreads();
    int j = s.n_found;
    const bool hit = j != 0x7fffffff && s.found;
    if (!hit) j = m - 1;
    const FlareCut result{s.keys[j], s.ids[j]};
    *crossed = hit;
    __syncthreads();
    return result;
  }
  // More than CAP elements share the one key lo: equal weights, ordered by id. The crossing is the
  // m-th of them (1-based); find its id with an ordered count over contiguous id ranges.
  const double weight = flare_weight(w, flare_value(lo));
  long long mth = n_in;
  bool hit = false;
  if (weight > 0.0 && s.found) {
    const double need = (target - above) / weight;
    double m_real = inclusive ? ceil(need) : floor(need) + 1.0;
    if (m_real < 1.0) m_real = 1.0;
    if (m_real <= double(n_in)) {
      mth = (long long)m_real;
      hit = true;
    }
  }
  // Tiles of 8 * FLARE_BLOCK ids in order; in a tile thread t owns 8 consecutive ids, so a block
  // scan of the threads' counts orders the matches by id.
  long long seen = 0;  // matches in earlier tiles
  for (int base = 0; base < n && seen < mth; base += FLARE_BLOCK * 8) {
    const int first = base + tid * 8;
    float v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = first + u < n ? x[first + u] : 0.0f;
    int mine = 0;
#pragma unroll
    for (int u = 0; u < 8; ++u) mine += first + u < n && flare_key(v[u]) == lo && flare_in_cut(lo, first + u, within);
    int incl = mine;
    for (int o = 1; o < 32; o <<= 1) {
      const int up = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += up;
    }
    if (lane == 31) s.warp_count[warp] = incl;
    __syncthreads();
    int offset = 0, tile = 0;
    for (int w2 = 0; w2 < FLARE_SAMPLE_WARPS; ++w2) {
      if (w2 < warp) offset += s.warp_count[w2];
      tile += s.warp_count[w2];
    }
    long long at = seen + offset + incl - mine;  // matches before this thread's first id
    if (at < mth && at + mine >= mth) {
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        if (first + u < n && flare_key(v[u]) == lo && flare_in_cut(lo, first + u, within) && ++at == mth) {
          s.cut = FlareCut{lo, first + u};
        }
      }
    }
    seen += tile;
    __syncthreads();
  }
  __syncthreads();
  const FlareCut result = s.cut;
  *crossed = hit;
  __syncthreads();
  return result;
}

// Logit bias and penalties into `out` (a copy of `raw`), in the host's order. Bias entries come
// stably sorted by id, so each run of one id is added in request order by one thread.
__device__ void flare_apply_penalties(const float* raw, float* out, int* marks, int vocab, const FlareSampleRow& p,
                                      const int* tokens) {
  const int tid = threadIdx.x;
  flare_for_each(FlareSource{raw, nullptr, vocab}, [&](float v, int id) { out[id] = v; });
  __syncthreads();
  const int* bias = tokens + p.bias_offset;
  for (int e = tid; e < p.n_bias; e += FLARE_BLOCK) {
    const int id = bias[2 * e];
    if (e > 0 && bias[2 * (e - 1)] == id) continue;
    float v = out[id];
    for (int f = e; f < p.n_bias && bias[2 * f] == id; ++f) v = __fadd_rn(v, __int_as_float(bias[2 * f + 1]));
    out[id] = v;
  }
  __syncthreads();
  const int* prompt = tokens + p.prompt_offset;
  const int* output = tokens + p.output_offset;
  const int n_history = p.n_prompt + p.n_output;
  const int seen_bit = 1 << 30, count_mask = seen_bit - 1;
  if (p.repetition_penalty != 1.0f) {
    for (int h = tid; h < n_history; h += FLARE_BLOCK) {
      const int t = h < p.n_prompt ? prompt[h] : output[h - p.n_prompt];
      if (t < 0 || t >= vocab) continue;
      if (atomicOr(&marks[t], seen_bit) & seen_bit) continue;  // another thread has it
      const float v = out[t];
      out[t] = v > 0.0f ? __fdiv_rn(v, p.repetition_penalty) : __fmul_rn(v, p.repetition_penalty);
    }
    __syncthreads();
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    for (int h = tid; h < p.n_output; h += FLARE_BLOCK) {
      const int t = output[h];
      if (t >= 0 && t < vocab) atomicAdd(&marks[t], 1);
    }
    __syncthreads();
    for (int h = tid; h < p.n_output; h += FLARE_BLOCK) {
      const int t = output[h];
      if (t < 0 || t >= vocab) continue;
      const int count = atomicAnd(&marks[t], ~count_mask) & count_mask;
      if (count == 0) continue;  // another thread has it
      const float penalty = __fadd_rn(__fmul_rn(p.frequency_penalty, float(count)), p.presence_penalty);
      out[t] = __fsub_rn(out[t], penalty);
    }
    __syncthreads();
  }
  for (int h = tid; h < n_history; h += FLARE_BLOCK) {  // leave `marks` all zero
    const int t = h < p.n_prompt ? prompt[h] : output[h - p.n_prompt];
    if (t >= 0 && t < vocab) marks[t] = 0;
  }
  __syncthreads();
}

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_sample(const float* __restrict__ logits, long long logits_stride, int vocab,  // [n_rows, vocab] f32
             const FlareSampleRow* __restrict__ rows,                                // [n_rows]
             const int* __restrict__ tokens,                                         // histories and biases
             float* processed, long long processed_stride,                          // scratch [n_rows, vocab]
             int* marks,                                                             // scratch [n_rows, vocab], zero
             int2* lists,                                                            // scratch [n_rows, 2, vocab]
             FlareSampleResult* __restrict__ results) {                              // [n_rows]
  flare_pdl_enter();
  __shared__ FlareShared s;
  const int tid = threadIdx.x;
  const FlareSampleRow& p = rows[blockIdx.x];  // read on use: a copy would hold 20 registers
  if (p.skip) return;
  const float* raw = logits + blockIdx.x * logits_stride;
  const bool penalized = p.n_bias > 0 || p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f ||
                         p.frequency_penalty != 0.0f;
  const float* x = raw;
  if (penalized) {
    float* out = processed + blockIdx.x * processed_stride;
    flare_apply_penalties(raw, out, marks + (long long)blockIdx.x * vocab, vocab, p, tokens);
    x = out;
  }

  // Raw max and min keys, processed max (first maximum) and min keys in one pass.
  u64 raw_max = 0, raw_min = 0, best = 0, low = 0;
  flare_for_each<2>(FlareSource{raw, nullptr, vocab}, [&](float v, int i) {
    const u32 kr = flare_key(v);
    const u32 kx = penalized ? flare_key(x[i]) : kr;
    raw_max = max(raw_max, u64(kr));
    raw_min = max(raw_min, u64(~kr));
    best = max(best, (u64(kx) << 32) | u32(~u32(i)));
    low = max(low, u64(~kx));
  });
  raw_max = flare_block_max_u64(raw_max, s);
  raw_min = flare_block_max_u64(raw_min, s);
  best = flare_block_max_u64(best, s);
  low = flare_block_max_u64(low, s);
  const u32 raw_hi = u32(raw_max), raw_lo = ~u32(raw_min), x_hi = u32(best >> 32), x_lo = ~u32(low);
  const int argmax = int(~u32(best));
  const FlareCut everything{0u, 0x7fffffff};
  int2* row_lists = lists + (long long)blockIdx.x * 2 * vocab;

  // Raw log-sum-exp (float terms, double total).
  const float raw_max_value = flare_value(raw_hi);
  float part = 0.0f;
  flare_for_each(FlareSource{raw, nullptr, vocab}, [&](float v, int) { part += expf(v - raw_max_value); });
  const double lse = double(raw_max_value) + log(flare_block_sum(double(part), s));

  int token = argmax;
  if (p.temperature != 0.0f) {
    FlareWeight w;
    w.temperature = double(p.temperature);
    w.max_scaled = double(x[argmax]) / w.temperature;
    w.min_p = double(p.min_p);
    bool crossed = false;
    FlareCut kept = everything;
    if (p.top_k > 0 && p.top_k < vocab) {
      w.mode = FLARE_COUNT;
      kept = flare_find(x, vocab, everything, w, double(p.top_k), true, false, x_lo, x_hi, row_lists, s, &crossed);
    }
    w.mode = FLARE_MASS;
    if (p.top_p < 1.0f) {  // the host sums p / total until it reaches top_p; the same up to rounding
      kept = flare_find(x, vocab, kept, w, double(p.top_p), true, true, x_lo, x_hi, row_lists, s, &crossed);
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
    token = flare_find(x, vocab, kept, w, u, false, true, x_lo, x_hi, row_lists, s, &crossed).id;  // u * kept
  }

  FlareSampleResult* r = results + blockIdx.x;
  const int n_top = min(p.n_top_logprobs, min(vocab, FLARE_SAMPLE_MAX_TOP));
  if (n_top > 0) {
    FlareWeight count;
    count.mode = FLARE_COUNT;
    bool crossed = false;
    const FlareCut top =
        flare_find(raw, vocab, everything, count, double(n_top), true, false, raw_lo, raw_hi, row_lists, s, &crossed);
    if (tid == 0) s.n_found = 0;
    __syncthreads();
    flare_for_each(FlareSource{raw, nullptr, vocab}, [&](float v, int i) {
      const u32 k = flare_key(v);
      if (!flare_in_cut(k, i, top)) return;
      const int slot = atomicAdd(&s.n_found, 1);
      if (slot < FLARE_SAMPLE_MAX_TOP) {
        s.keys[slot] = k;
        s.ids[slot] = i;
      }
    });
    __syncthreads();
    if (tid == 0) {
      const int m = min(s.n_found, n_top);
      for (int a = 1; a < m; ++a) {  // insertion sort into sigma order
        const u32 k = s.keys[a];
        const int id = s.ids[a];
        int b = a - 1;
        for (; b >= 0 && flare_before(k, id, s.keys[b], s.ids[b]); --b) {
          s.keys[b + 1] = s.keys[b];
          s.ids[b + 1] = s.ids[b];
        }
        s.keys[b + 1] = k;
        s.ids[b + 1] = id;
      }
      for (int a = 0; a < m; ++a) {
        r->top_ids[a] = s.ids[a];
        r->top_logprobs[a] = float(double(raw[s.ids[a]]) - lse);
      }
      r->n_top = m;
    }
  } else if (tid == 0) {
    r->n_top = 0;
  }
  if (tid == 0) {
    r->token = token;
    r->logprob = float(double(raw[token]) - lse);
  }
}
