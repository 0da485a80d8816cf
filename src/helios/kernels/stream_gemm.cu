// Tensor-core streaming GEMM for decode batches on Hopper (sm_90a): out[m, n] = x[m, k] @ w[n, k]^T
// (+ bias[n]) for 9 <= m <= STREAM_N (the host picks the smallest tile >= m), x and w bf16
// (row-major, rows strided), F32 accumulation, out bf16 or f32. At such m the GEMM is still bound
// by streaming w from HBM (each weight feeds at most STREAM_N multiply-adds), but the output has
// few tiles: cuBLASLt's tiles leave most SMs idle or spend their time in a separate split-K
// reduction. This kernel gives every SM a share of the weight stream and keeps it full with the
// Hopper copy engine (TMA).
//
// Roles in a CTA of 288 threads: warps 0-7 are two consumer warpgroups, warp 8 is the producer.
// - The producer's lane 0 streams k-blocks of 64 through a ring of k_stream_stages stages with TMA
//   (cp.async.bulk.tensor): per stage a 128-row weight tile (16 KiB) and the STREAM_N-row x tile,
//   both 128-byte swizzled, which is the layout wgmma reads. Rows past n or m, and k past k, arrive
//   as zeros (the tensor maps' bounds), so the loop has no guards.
// - Each consumer warpgroup multiplies its 64 weight rows by the x tile with wgmma m64nNk16, the
//   weights as A (64 output columns) and x as B (N output rows), accumulating in registers.
// Full/empty mbarriers hand stages between them; a stage is released once both warpgroups' wgmmas
// that read it have completed.
//
// Split-K: grid (ceil(n / 128), splits), launched as clusters of 1 x splits CTAs (splits <= 8, the
// portable cluster size); split s takes k-blocks [s * nkb / splits, (s + 1) * nkb / splits). The
// CTAs of a tile add their partial tiles through distributed shared memory, each summing its share
// in rank order, so the result does not depend on timing and nothing goes through global memory.
//
// SwiGLU in the epilogue (the _swiglu entry points): w is a gate_up weight [2 x inter, k] (gate rows,
// then up rows) and out [m, inter] = bf16(silu(g) x u), g and u the GEMM's gate and up results each
// rounded to bf16 first, as the plain GEMM's output followed by the swiglu kernel computes them. A
// CTA's 128 weight rows are then 64 gate rows and the same 64 up rows (one 3-D TMA box over the
// weight seen as [2][inter][k]), so consumer warpgroup 0 holds gate and warpgroup 1 up of the same
// 64 output columns; both go through the ring (or the cluster's rings) to meet, the partials path
// of split k.
//
// Programmatic dependent launch: the producer's first weight tiles go out before it waits for the
// previous kernel (weights never change while a model is loaded); x is read, and out written, only
// after the wait.
//
// Entry points flare_stream_gemm_n<N>_<bf16|f32|swiglu>, N = STREAM_N in {32, 64, 128} (define; one
// module per N). Parameters: the weight and x tensor maps (__grid_constant__ CUtensorMap, 128 bytes,
// encoded by the host per launch: bf16, 128-byte swizzle, zero fill; w 2-D dims {k, rows} box {64,
// 128}, or for swiglu 3-D dims {k, inter, 2} box {64, 64, 2}; x 2-D dims {k, m} box {64, N}), bias
// (f32 [n] or null; null for swiglu), out, out_stride, m, n (inter for swiglu), k. Dynamic shared
// memory: the ring (k_stream_stages below), 1 KiB of alignment slack and 256 bytes of barriers
// (StreamGemm::shared_bytes keeps the same formula). Compiled for other architectures the entry
// points are empty (the host runs them only on sm_90).
#include <cuda_bf16.h>

#ifndef STREAM_N
#define STREAM_N 64
#endif

#if STREAM_N != 32 && STREAM_N != 64 && STREAM_N != 128
#error "stream_gemm: STREAM_N must be 32, 64 or 128"
#endif

constexpr int k_stream_n = STREAM_N;
constexpr int k_stream_block_k = 64;          // bf16 elements per 128-byte swizzle row
constexpr int k_stream_rows = 128;            // weight rows per CTA, 64 per consumer warpgroup
constexpr int k_stream_consumer_threads = 256;
constexpr int k_stream_threads = k_stream_consumer_threads + 32;
constexpr int k_stream_w_bytes = k_stream_rows * k_stream_block_k * 2;       // 16 KiB
constexpr int k_stream_x_bytes = k_stream_n * k_stream_block_k * 2;          // 4, 8 or 16 KiB
constexpr int k_stream_stage_bytes = k_stream_w_bytes + k_stream_x_bytes;
// About 100 KiB of ring, so two CTAs share an SM: one's ramp and tail hide under the other's stream.
constexpr int k_stream_stages = 100 * 1024 / k_stream_stage_bytes;
constexpr int k_stream_acc = k_stream_n / 2;  // F32 accumulators per consumer thread (64 x N / 128)

struct alignas(64) FlareTensorMap {
  unsigned long long words[16];
};

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLARE_STREAM_GEMM_BODY 1
#endif

#ifdef FLARE_STREAM_GEMM_BODY

__device__ __forceinline__ unsigned flare_smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void flare_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void flare_mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void flare_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void flare_mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// A 2-D TMA load of the box at (k0, row0) into shared memory, counted on `bar`, with an L2 policy.
__device__ __forceinline__ void flare_tma_load(unsigned dst, const FlareTensorMap* map, int k0, int row0, unsigned bar,
                                               unsigned long long policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(k0), "r"(row0), "r"(bar), "l"(policy)
      : "memory");
}

// The SwiGLU weight tile: the 3-D box at (k0, row0, 0) of [2][inter][k], 64 gate rows then the same
// 64 up rows, in the layout of a 128-row 2-D box.
__device__ __forceinline__ void flare_tma_load_pair(unsigned dst, const FlareTensorMap* map, int k0, int row0,
                                                    unsigned bar, unsigned long long policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(k0), "r"(row0), "r"(0), "r"(bar), "l"(policy)
      : "memory");
}

template <bool Swiglu>
__device__ __forceinline__ void flare_tma_load_weights(unsigned dst, const FlareTensorMap* map, int k0, int row0,
                                                       unsigned bar, unsigned long long policy) {
  if (Swiglu) {
    flare_tma_load_pair(dst, map, k0, row0, bar, policy);
  } else {
    flare_tma_load(dst, map, k0, row0, bar, policy);
  }
}

// wgmma's shared-memory matrix descriptor of a K-major tile with 128-byte rows, 128-byte swizzle
// (what TMA wrote): start address, stride 1024 bytes between groups of 8 rows, swizzle mode 1.
__device__ __forceinline__ unsigned long long flare_wgmma_desc(unsigned address) {
  return (unsigned long long)((address & 0x3ffff) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) |
         (1ull << 62);
}

__device__ __forceinline__ void flare_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void flare_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void flare_wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }

// Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmma.
template <int N>
__device__ __forceinline__ void flare_fence_registers(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d[64 x N] += A[64 x 16] B[N x 16]^T, both from shared memory descriptors, K-major (no transpose),
// scale-d 1: the accumulators start at zero and every call adds.
#if STREAM_N == 32
__device__ __forceinline__ void flare_wgmma(float (&d)[16], unsigned long long desc_a, unsigned long long desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, "
      "%8, %9, %10, %11, %12, %13, %14, %15}, "
      "%16, %17, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}
#elif STREAM_N == 64
__device__ __forceinline__ void flare_wgmma(float (&d)[32], unsigned long long desc_a, unsigned long long desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, "
      "%8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}
#else
__device__ __forceinline__ void flare_wgmma(float (&d)[64], unsigned long long desc_a, unsigned long long desc_b) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, "
      "%8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, "
      "%40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, "
      "%56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}
#endif

__device__ __forceinline__ void flare_stream_store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ void flare_stream_store(float* p, float v) { *p = v; }

// Accumulator d[4c + 2h + e] of consumer thread t (warp w of its warpgroup, lane l) is weight row
// 16w + l / 4 + 8h of the warpgroup's 64 (rows0 onwards) and x row 8c + 2(l % 4) + e (wgmma's D
// fragment): output element [x row][weight row].
template <typename Out>
__device__ __forceinline__ void flare_stream_store_one(float v, int i, int t, const float* __restrict__ bias,
                                                       Out* __restrict__ out, long long out_stride, int m, int n,
                                                       int rows0) {
  const int w = (t % 128) / 32, lane = t % 32;
  const int c = i / 4, h = (i % 4) / 2, e = i % 2;
  const int col = rows0 + 16 * w + lane / 4 + 8 * h;
  const int row = 8 * c + 2 * (lane % 4) + e;
  if (col < n && row < m) flare_stream_store(out + (long long)row * out_stride + col, v + (bias ? bias[col] : 0.0f));
}

template <typename Out>
__device__ __forceinline__ void flare_stream_epilogue(const float (&acc)[k_stream_acc], const float* __restrict__ bias,
                                                      Out* __restrict__ out, long long out_stride, int m, int n,
                                                      int rows0, int t) {
#pragma unroll
  for (int i = 0; i < k_stream_acc; ++i) flare_stream_store_one(acc[i], i, t, bias, out, out_stride, m, n, rows0);
}

__device__ __forceinline__ void flare_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// Four floats at shared address `local` of cluster CTA `rank`.
__device__ __forceinline__ float4 flare_cluster_load4(unsigned local, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

// The consumers' partial tile into the ring as [accumulator][consumer thread], once both warpgroups
// are done reading it (the split and SwiGLU epilogues read it back, across the cluster for split k).
__device__ __forceinline__ void flare_stream_park_partials(unsigned char* ring, const float (&acc)[k_stream_acc]) {
  float* partial = reinterpret_cast<float*>(ring);
  asm volatile("bar.sync 1, %0;\n" ::"n"(k_stream_consumer_threads) : "memory");
#pragma unroll
  for (int i = 0; i < k_stream_acc; ++i) partial[i * k_stream_consumer_threads + threadIdx.x] = acc[i];
}

// Four floats at shared address `local` of cluster CTA `rank`, or of this CTA when it is alone (a
// launch without a cluster).
__device__ __forceinline__ float4 flare_partial_load4(unsigned local, unsigned rank, int splits) {
  if (splits > 1) return flare_cluster_load4(local, rank);
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(local)
               : "memory");
  return v;
}

__device__ __forceinline__ float flare_silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// The SwiGLU epilogue: the partial tiles are in every CTA's ring as [accumulator][consumer thread];
// CTA `split` sums its share of the gate values (consumer threads 0-127) and their up values (the
// same accumulator of thread + 128) over the cluster in rank order, and stores bf16(silu(g) x u).
__device__ __forceinline__ void flare_stream_swiglu_share(unsigned ring_base, int split, int splits,
                                                          __nv_bfloat16* __restrict__ out, long long out_stride,
                                                          int m, int inter, int col0, int t) {
  constexpr int gate_quads = k_stream_acc * 128 / 4;
  const int begin = (int)((long long)split * gate_quads / splits);
  const int end = (int)((long long)(split + 1) * gate_quads / splits);
  for (int q = begin + t; q < end; q += k_stream_consumer_threads) {
    const int i = q / 32, t0 = 4 * (q % 32);  // accumulator i of gate threads t0..t0 + 3
    const unsigned gate_at = 4u * unsigned(i * k_stream_consumer_threads + t0);
    float4 g = make_float4(0.0f, 0.0f, 0.0f, 0.0f), u = g;
    for (int r = 0; r < splits; ++r) {
      const float4 gv = flare_partial_load4(ring_base + gate_at, r, splits);
      const float4 uv = flare_partial_load4(ring_base + gate_at + 4 * 128, r, splits);
      g.x += gv.x, g.y += gv.y, g.z += gv.z, g.w += gv.w;
      u.x += uv.x, u.y += uv.y, u.z += uv.z, u.w += uv.w;
    }
    const float gs[4] = {g.x, g.y, g.z, g.w}, us[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float gate = __bfloat162float(__float2bfloat16(gs[j])), up = __bfloat162float(__float2bfloat16(us[j]));
      flare_stream_store_one(flare_silu_mul(gate, up), i, t0 + j, nullptr, out, out_stride, m, inter, col0);
    }
  }
}

template <typename Out, bool Swiglu>
__device__ __forceinline__ void flare_stream_gemm(const FlareTensorMap* w_map, const FlareTensorMap* x_map,
                                                  const float* __restrict__ bias, Out* __restrict__ out,
                                                  long long out_stride, int m, int n, int k) {
  extern __shared__ __align__(1024) unsigned char flare_stream_smem[];
  // 1024-byte alignment (the swizzle's period) of the ring, whatever the dynamic base is.
  unsigned char* ring = flare_stream_smem + ((1024 - (flare_smem_address(flare_stream_smem) & 1023)) & 1023);
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(ring + k_stream_stages * k_stream_stage_bytes);
  const unsigned ring_base = flare_smem_address(ring);
  const unsigned full0 = flare_smem_address(bars), empty0 = full0 + 8 * k_stream_stages;

  const int tile = blockIdx.x, splits = gridDim.y, split = blockIdx.y;
  const int nkb = (k + k_stream_block_k - 1) / k_stream_block_k;
  const int kb_begin = (int)((long long)split * nkb / splits), kb_end = (int)((long long)(split + 1) * nkb / splits);
  const int n_blocks = kb_end - kb_begin;
  // Swiglu: 64 output columns, whose gate and up weight rows both begin at row0 of their half.
  const int row0 = tile * (Swiglu ? k_stream_rows / 2 : k_stream_rows);
  const bool producer = threadIdx.x >= k_stream_consumer_threads;

  if (threadIdx.x == k_stream_consumer_threads) {
    for (int s = 0; s < k_stream_stages; ++s) {
      flare_mbar_init(full0 + 8 * s, 1);
      flare_mbar_init(empty0 + 8 * s, 2);  // one arrival per consumer warpgroup
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  float acc[k_stream_acc];
#pragma unroll
  for (int i = 0; i < k_stream_acc; ++i) acc[i] = 0.0f;
  if (threadIdx.x == k_stream_consumer_threads) {
    // Producer. The weights are read once (evict first); x is read by every CTA (evict last).
    unsigned long long w_policy, x_policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(w_policy));
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(x_policy));
    const int prologue = n_blocks < k_stream_stages ? n_blocks : k_stream_stages;
    for (int i = 0; i < prologue; ++i) {
      const unsigned stage = ring_base + i * k_stream_stage_bytes;
      flare_mbar_expect_tx(full0 + 8 * i, k_stream_stage_bytes);
      flare_tma_load_weights<Swiglu>(stage, w_map, (kb_begin + i) * k_stream_block_k, row0, full0 + 8 * i, w_policy);
    }
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    for (int i = 0; i < prologue; ++i) {
      const unsigned stage = ring_base + i * k_stream_stage_bytes;
      flare_tma_load(stage + k_stream_w_bytes, x_map, (kb_begin + i) * k_stream_block_k, 0, full0 + 8 * i, x_policy);
    }
    for (int i = prologue; i < n_blocks; ++i) {
      const int s = i % k_stream_stages;
      flare_mbar_wait(empty0 + 8 * s, ((i / k_stream_stages) & 1) ^ 1);
      const unsigned stage = ring_base + s * k_stream_stage_bytes;
      const int k0 = (kb_begin + i) * k_stream_block_k;
      flare_mbar_expect_tx(full0 + 8 * s, k_stream_stage_bytes);
      flare_tma_load_weights<Swiglu>(stage, w_map, k0, row0, full0 + 8 * s, w_policy);
      flare_tma_load(stage + k_stream_w_bytes, x_map, k0, 0, full0 + 8 * s, x_policy);
    }
  } else if (!producer) {
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    const int group = threadIdx.x / 128;  // this warpgroup's 64 weight rows: row0 + 64 * group
    for (int i = 0; i < n_blocks; ++i) {
      const int s = i % k_stream_stages;
      flare_mbar_wait(full0 + 8 * s, (i / k_stream_stages) & 1);
      const unsigned stage = ring_base + s * k_stream_stage_bytes;
      const unsigned long long a = flare_wgmma_desc(stage + group * (k_stream_w_bytes / 2));
      const unsigned long long b = flare_wgmma_desc(stage + k_stream_w_bytes);
      flare_fence_registers(acc);
      flare_wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < k_stream_block_k / 16; ++kk) flare_wgmma(acc, a + 2 * kk, b + 2 * kk);  // +32 bytes
      flare_wgmma_commit();
      flare_wgmma_wait_all();
      flare_fence_registers(acc);
      if (threadIdx.x % 128 == 0) flare_mbar_arrive(empty0 + 8 * s);
    }
  }

  if (Swiglu) {
    if (!producer) flare_stream_park_partials(ring, acc);
    __syncwarp();
    if (splits > 1) flare_cluster_sync(); else __syncthreads();
    if (!producer) {
      flare_stream_swiglu_share(ring_base, split, splits, reinterpret_cast<__nv_bfloat16*>(out), out_stride, m, n, row0,
                                threadIdx.x);
    }
    __syncwarp();
    if (splits > 1) flare_cluster_sync();  // every ring stays alive until the cluster has read it
    return;
  }
  if (splits == 1) {
    if (!producer) flare_stream_epilogue(acc, bias, out, out_stride, m, n, row0 + 64 * (threadIdx.x / 128), threadIdx.x);
    return;
  }
  // Split k: the CTAs of a tile form a cluster (1 x splits). Each puts its partial tile in its ring,
  // [accumulator][consumer thread], once both its warpgroups are done reading the ring; then CTA r
  // sums its share of the tile over every CTA's ring (distributed shared memory), in rank order so
  // the result does not depend on timing, and stores it. The second cluster barrier keeps every ring
  // alive until all CTAs have read it.
  if (!producer) flare_stream_park_partials(ring, acc);
  __syncwarp();
  flare_cluster_sync();
  if (!producer) {
    constexpr int quads = k_stream_acc * k_stream_consumer_threads / 4;
    const int begin = (int)((long long)split * quads / splits), end = (int)((long long)(split + 1) * quads / splits);
    for (int q = begin + threadIdx.x; q < end; q += k_stream_consumer_threads) {
      float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int r = 0; r < splits; ++r) {
        const float4 v = flare_cluster_load4(ring_base + 16 * q, r);
        sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
      }
      const float values[4] = {sum.x, sum.y, sum.z, sum.w};
      // Value f = 4q + j is accumulator f / 256 of consumer thread f % 256.
      const int i = 4 * q / k_stream_consumer_threads;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int t = (4 * q + j) % k_stream_consumer_threads;
        flare_stream_store_one(values[j], i, t, bias, out, out_stride, m, n, row0 + 64 * (t / 128));
      }
    }
  }
  __syncwarp();
  flare_cluster_sync();
}

#endif  // FLARE_STREAM_GEMM_BODY

#define FLARE_STREAM_ENTRY(N, OUT_NAME, OUT, SWIGLU)                                                                  \
  extern "C" __global__ void __launch_bounds__(k_stream_threads) flare_stream_gemm_n##N##_##OUT_NAME(                 \
      const __grid_constant__ FlareTensorMap w_map, const __grid_constant__ FlareTensorMap x_map, const float* bias,  \
      OUT* out, long long out_stride, int m, int n, int k) {                                                          \
    FLARE_STREAM_CALL(OUT, SWIGLU)                                                                                    \
  }

#ifdef FLARE_STREAM_GEMM_BODY
#define FLARE_STREAM_CALL(OUT, SWIGLU)                                    \
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");       \
  flare_stream_gemm<OUT, SWIGLU>(&w_map, &x_map, bias, out, out_stride, m, n, k);
#else
#define FLARE_STREAM_CALL(OUT, SWIGLU)
#endif

#define FLARE_STREAM_ENTRIES(N)                        \
  FLARE_STREAM_ENTRY(N, bf16, __nv_bfloat16, false)  \
  FLARE_STREAM_ENTRY(N, f32, float, false)           \
  FLARE_STREAM_ENTRY(N, swiglu, __nv_bfloat16, true)

#if STREAM_N == 32
FLARE_STREAM_ENTRIES(32)
#elif STREAM_N == 64
FLARE_STREAM_ENTRIES(64)
#else
FLARE_STREAM_ENTRIES(128)
#endif
