// RMSNorm fused with the residual add, BF16 in and out, F32 accumulation. One block per row:
//   with residual:    residual = bf16(residual + x);  out = bf16(weight * (residual * inv))
//   without residual: out = bf16(weight * (x * inv)),  inv = 1 / sqrt(mean(v^2) + eps)
// The residual stream is rounded to BF16 before the norm reads it, as HF transformers does in BF16.
// out may alias x (each thread reads its own elements before writing them).
//   flare_rms_norm_vec: the row read once in 16-byte chunks of 8 values and held in registers
//     between the reduction and the write (up to k_vec_chunks chunks per thread), the weight's
//     chunks loaded before the reduction so their latency hides behind it: a decode step's row is
//     one round trip to memory instead of three. Needs cols % 8 == 0, rows, strides and weight
//     aligned to 16 bytes, and cols <= 8 * k_vec_chunks * blockDim.x; blockDim.x is the host's
//     choice, a multiple of 32 up to k_vec_threads.
//   flare_rms_norm: any shape: FLARE_BLOCK threads stride over the row, reading it twice.
//   flare_rms_norm_partials: as flare_rms_norm_vec with the residual, x being the sum of a split-K
//     GEMM's F32 partials (its comment).
// Defines: FLARE_BLOCK (threads per block of flare_rms_norm, a multiple of 32, default 256).
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

#ifndef FLARE_BLOCK
#define FLARE_BLOCK 256
#endif

constexpr int k_vec_chunks = 4;     // 16-byte chunks per thread: 16 registers of row, 32 of weight
constexpr int k_vec_threads = 512;  // so rows up to 8 * 4 * 512 = 16384 values take the vector path

__device__ __forceinline__ float flare_warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The sum of v over the block, returned to every thread.
__device__ __forceinline__ float flare_block_sum(float v) {
  __shared__ float partial[FLARE_BLOCK / 32];
  v = flare_warp_sum(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < FLARE_BLOCK / 32; ++w) total += partial[w];
  return total;
}

// The same for a block of blockDim.x <= k_vec_threads threads.
__device__ __forceinline__ float flare_block_sum_any(float v) {
  __shared__ float partial[k_vec_threads / 32];
  v = flare_warp_sum(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
  const int n_warps = blockDim.x >> 5;
  for (int w = 0; w < n_warps; ++w) total += partial[w];
  return total;
}

// 8 bf16 of a 16-byte chunk as f32 (element 0 in the low half of the first word), and back.
__device__ __forceinline__ void flare_unpack8(const uint4& u, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    f[2 * e] = __low2float(h[e]);
    f[2 * e + 1] = __high2float(h[e]);
  }
}
__device__ __forceinline__ uint4 flare_pack8(const float (&f)[8]) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int e = 0; e < 4; ++e) h[e] = __floats2bfloat162_rn(f[2 * e], f[2 * e + 1]);
  return u;
}

// This thread's 16-byte chunks j = threadIdx.x + i * blockDim.x (coalesced) of a row of n_chunks.
__device__ __forceinline__ void flare_load_chunks(uint4 (&dst)[k_vec_chunks], const uint4* src, int n_chunks) {
#pragma unroll
  for (int i = 0; i < k_vec_chunks; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    if (j < n_chunks) dst[i] = src[j];
  }
}

// F32 values for the same chunks, eight a chunk (the norm weight, a split-K partial row).
__device__ __forceinline__ void flare_load_f32_chunks(float4 (&lo)[k_vec_chunks], float4 (&hi)[k_vec_chunks],
                                                         const float4* w4, int n_chunks) {
#pragma unroll
  for (int i = 0; i < k_vec_chunks; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    if (j < n_chunks) {
      lo[i] = w4[2 * j];
      hi[i] = w4[2 * j + 1];
    }
  }
}

// residual = bf16(residual + f) for one chunk: stores it, leaves it in `chunk` and its values in f
// (the residual stream in bf16, which the norm reads).
__device__ __forceinline__ void flare_add_residual(float (&f)[8], uint4 res, uint4& chunk, uint4* dst) {
  float r[8];
  flare_unpack8(res, r);
#pragma unroll
  for (int e = 0; e < 8; ++e) f[e] = r[e] + f[e];
  chunk = flare_pack8(f);
  *dst = chunk;
  flare_unpack8(chunk, f);
}

// This thread's chunks j = threadIdx.x + i * blockDim.x of a normed row: dst = bf16(w * (v * inv)).
__device__ __forceinline__ void flare_store_normed(const uint4 (&chunk)[k_vec_chunks], const float4 (&w_lo)[k_vec_chunks],
                                                   const float4 (&w_hi)[k_vec_chunks], float inv, uint4* dst,
                                                   int n_chunks) {
#pragma unroll
  for (int i = 0; i < k_vec_chunks; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    if (j >= n_chunks) continue;
    float f[8];
    flare_unpack8(chunk[i], f);
    const float w[8] = {w_lo[i].x, w_lo[i].y, w_lo[i].z, w_lo[i].w, w_hi[i].x, w_hi[i].y, w_hi[i].z, w_hi[i].w};
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = w[e] * (f[e] * inv);
    dst[j] = flare_pack8(f);
  }
}

extern "C" __global__ void __launch_bounds__(k_vec_threads)
flare_rms_norm_vec(const __nv_bfloat16* x, long long x_stride,          // [rows, cols]
                   __nv_bfloat16* residual, long long residual_stride,  // [rows, cols] or null
                   const float* __restrict__ weight,                    // [cols] f32
                   float eps,
                   __nv_bfloat16* out, long long out_stride,            // [rows, cols]
                   int cols) {
  flare_pdl_enter();
  const long long row = blockIdx.x;
  const int n_chunks = cols / 8;
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * x_stride);
  uint4* rr = residual ? reinterpret_cast<uint4*>(residual + row * residual_stride) : nullptr;
  const float4* w4 = reinterpret_cast<const float4*>(weight);
  uint4 chunk[k_vec_chunks];  // this thread's chunks j = threadIdx.x + i * blockDim.x (coalesced)
  uint4 res[k_vec_chunks];
  float4 w_lo[k_vec_chunks], w_hi[k_vec_chunks];
  // Every load first, so they are in flight together.
  flare_load_chunks(chunk, xr, n_chunks);
  if (rr) flare_load_chunks(res, rr, n_chunks);
  flare_load_f32_chunks(w_lo, w_hi, w4, n_chunks);
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < k_vec_chunks; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    if (j >= n_chunks) continue;
    float f[8];
    flare_unpack8(chunk[i], f);
    if (rr) flare_add_residual(f, res[i], chunk[i], rr + j);
#pragma unroll
    for (int e = 0; e < 8; ++e) sum += f[e] * f[e];
  }
  const float inv = 1.0f / sqrtf(flare_block_sum_any(sum) / float(cols) + eps);
  flare_store_normed(chunk, w_lo, w_hi, inv, reinterpret_cast<uint4*>(out + row * out_stride), n_chunks);
}

extern "C" __global__ void __launch_bounds__(FLARE_BLOCK)
flare_rms_norm(const __nv_bfloat16* x, long long x_stride,    // [rows, cols]
               __nv_bfloat16* residual, long long residual_stride,  // [rows, cols] or null
               const float* __restrict__ weight,              // [cols] f32
               float eps,
               __nv_bfloat16* out, long long out_stride,      // [rows, cols]
               int cols) {
  flare_pdl_enter();
  const long long row = blockIdx.x;
  const __nv_bfloat16* xr = x + row * x_stride;
  __nv_bfloat16* rr = residual ? residual + row * residual_stride : nullptr;
  float sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += FLARE_BLOCK) {
    float v = __bfloat162float(xr[c]);
    if (rr) {
      const __nv_bfloat16 r = __float2bfloat16(__bfloat162float(rr[c]) + v);
      rr[c] = r;
      v = __bfloat162float(r);
    }
    sum += v * v;
  }
  const float inv = 1.0f / sqrtf(flare_block_sum(sum) / float(cols) + eps);
  const __nv_bfloat16* src = rr ? rr : xr;
  __nv_bfloat16* dst = out + row * out_stride;
  for (int c = threadIdx.x; c < cols; c += FLARE_BLOCK) {
    dst[c] = __float2bfloat16(weight[c] * (__bfloat162float(src[c]) * inv));
  }
}

// The residual add and RMSNorm after a GEMM that left its output as F32 split-K partials
// [n_parts][rows][cols], each part row-major with rows of cols (GemmRunner::run_split):
//   delta = bf16(sum of the parts, in part order);  then as flare_rms_norm_vec with the residual.
// Rounding delta to BF16 first keeps the numerics of the unsplit GEMM, whose BF16 output the norm
// would read. Shape conditions as flare_rms_norm_vec; partials 16-byte aligned.
extern "C" __global__ void __launch_bounds__(k_vec_threads)
flare_rms_norm_partials(const float* partials, long long part_stride, int n_parts,  // [n_parts][rows][cols]
                        __nv_bfloat16* residual, long long residual_stride,         // [rows, cols]
                        const float* __restrict__ weight,                           // [cols] f32
                        float eps,
                        __nv_bfloat16* out, long long out_stride,                   // [rows, cols]
                        int cols) {
  flare_pdl_enter();
  const long long row = blockIdx.x;
  const int n_chunks = cols / 8;
  const float* first = partials + row * cols;
  uint4* rr = reinterpret_cast<uint4*>(residual + row * residual_stride);
  const float4* w4 = reinterpret_cast<const float4*>(weight);
  float acc[k_vec_chunks][8] = {};
  uint4 res[k_vec_chunks];
  flare_load_chunks(res, rr, n_chunks);
  for (int p = 0; p < n_parts; ++p) {
    const float4* part = reinterpret_cast<const float4*>(first + p * part_stride);
    float4 lo[k_vec_chunks], hi[k_vec_chunks];
    flare_load_f32_chunks(lo, hi, part, n_chunks);
#pragma unroll
    for (int i = 0; i < k_vec_chunks; ++i) {
      const float v[8] = {lo[i].x, lo[i].y, lo[i].z, lo[i].w, hi[i].x, hi[i].y, hi[i].z, hi[i].w};
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[i][e] += v[e];
    }
  }
  uint4 chunk[k_vec_chunks];
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < k_vec_chunks; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    if (j >= n_chunks) continue;
    float f[8];
    flare_unpack8(flare_pack8(acc[i]), f);  // the GEMM's output in BF16
    flare_add_residual(f, res[i], chunk[i], rr + j);
#pragma unroll
    for (int e = 0; e < 8; ++e) sum += f[e] * f[e];
  }
  // The weight's loads go out before the block's reduction, whose barrier hides their latency.
  float4 w_lo[k_vec_chunks], w_hi[k_vec_chunks];
  flare_load_f32_chunks(w_lo, w_hi, w4, n_chunks);
  const float inv = 1.0f / sqrtf(flare_block_sum_any(sum) / float(cols) + eps);
  flare_store_normed(chunk, w_lo, w_hi, inv, reinterpret_cast<uint4*>(out + row * out_stride), n_chunks);
}
