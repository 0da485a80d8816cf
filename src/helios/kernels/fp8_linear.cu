// GEMMs on FP8 E4M3 weights with scales (cuda/gemm_runner.h runs them): out[m, n] = x[m, k] @
// dequantized(w)[n, k]^T, where w's element (r, c) stands for e4m3(r, c) * scales[r >> row_shift]
// [c >> col_shift] (scales row-major with scale_cols columns). Two scale layouts occur: 128 x 128
// blocks (row_shift = col_shift = 7, DeepSeek-style checkpoints) and one scale per row (row_shift 0,
// col_shift 31: per-channel checkpoints, and per-tensor ones expanded to rows at load).
//
// Two ways to run one:
// - cuBLASLt's FP8 tensor-core GEMM, which wants FP8 activations too: flare_fp8_linear_quantize_blocks
//   and flare_fp8_linear_quantize_rows quantize x dynamically, with one scale per 128 elements of a row
//   (cuBLASLt's VEC128_32F, laid out [k / 128][m]: column-major, as it wants them) or per row
//   (OUTER_VEC_32F, [m]). A scale is amax / 448, so the largest magnitude maps to E4M3's largest
//   finite value; an all-zero block gets scale 1.
// - flare_fp8_linear_skinny_*: a weight-streaming kernel for small m (decode), BF16 activations, no
//   activation quantization: each weight byte is read once and widened in registers.
//
// Widening without a conversion unit: E4M3 s.eeee.mmm placed at the top of a word and shifted right
// arithmetically by 4 gives s.ssss.eeee.mmm...; clearing bits 30..27 leaves the F32 s.0000eeee.mmm,
// which is the E4M3 value times 2^-120 exactly, subnormals included (F32 denormals, which these
// kernels keep: NVRTC runs without --use_fast_math, so nothing flushes them). The 2^120 goes into
// the scale. Three integer operations per weight, where a cvt through F16 would take the narrower
// conversion pipe.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

__device__ __forceinline__ void flare_pdl_trigger() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void flare_pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

constexpr float k_fp8_max = 448.0f;
constexpr float k_fp8_widen_scale = 1.329227995784915872903807060280344576e36f;  // 2^120

__device__ __forceinline__ float flare_fp8_scale_of(float amax) { return amax > 0.0f ? amax / k_fp8_max : 1.0f; }

__device__ __forceinline__ unsigned short flare_fp8_pack2(float a, float b) {
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

__device__ __forceinline__ float flare_bf16_lo(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float flare_bf16_hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); }

// ---------------------------------------------------------------------------------------------
// Activation quantization for cuBLASLt.

// One warp per 128-element block of a row (lane j holds elements 4j..4j+3); block 256 threads = 8
// blocks of one row; grid (m, ceil(k / 1024)). q [m, k] contiguous; scales[(c / 128) * scale_ld +
// row] (scale_ld >= m: the host's choice, Fp8Kernels::scale_ld).
// Requires k % 128 == 0 and 8-byte aligned x rows.
extern "C" __global__ void __launch_bounds__(256) flare_fp8_linear_quantize_blocks(const __nv_bfloat16* __restrict__ x,
                                                                           long long x_stride,
                                                                           unsigned char* __restrict__ q,
                                                                           float* __restrict__ scales, int m, int k,
                                                                           int scale_ld) {
  flare_pdl_trigger();
  const int row = blockIdx.x, lane = threadIdx.x % 32;
  const int block = blockIdx.y * 8 + threadIdx.x / 32;
  flare_pdl_wait();
  if (block * 128 >= k) return;
  const long long col = (long long)block * 128 + lane * 4;
  const uint2 raw = *reinterpret_cast<const uint2*>(x + row * x_stride + col);
  const float v[4] = {flare_bf16_lo(raw.x), flare_bf16_hi(raw.x), flare_bf16_lo(raw.y), flare_bf16_hi(raw.y)};
  float amax = fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3])));
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  const float scale = flare_fp8_scale_of(amax);
  const float inv = 1.0f / scale;
  const unsigned packed = unsigned(flare_fp8_pack2(v[0] * inv, v[1] * inv)) |
                          (unsigned(flare_fp8_pack2(v[2] * inv, v[3] * inv)) << 16);
  *reinterpret_cast<unsigned*>(q + (long long)row * k + col) = packed;
  if (lane == 0) scales[(long long)block * scale_ld + row] = scale;
}

// One block per row: the row's amax, then its quantization with one scale. Block 256 threads;
// grid (m). q [m, k] contiguous; scales[row]. Requires k % 8 == 0 and 16-byte aligned x rows.
extern "C" __global__ void __launch_bounds__(256) flare_fp8_linear_quantize_rows(const __nv_bfloat16* __restrict__ x,
                                                                         long long x_stride,
                                                                         unsigned char* __restrict__ q,
                                                                         float* __restrict__ scales, int m, int k,
                                                                         int /*scale_ld: one scale per row*/) {
  flare_pdl_trigger();
  __shared__ float warp_max[8];
  const int row = blockIdx.x;
  const __nv_bfloat16* xr = x + row * x_stride;
  flare_pdl_wait();
  float amax = 0.0f;
  for (int c = threadIdx.x * 8; c < k; c += 256 * 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(xr + c);
    const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) amax = fmaxf(amax, fmaxf(fabsf(flare_bf16_lo(words[j])), fabsf(flare_bf16_hi(words[j]))));
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = warp_max[0];
#pragma unroll
  for (int w = 1; w < 8; ++w) amax = fmaxf(amax, warp_max[w]);
  const float scale = flare_fp8_scale_of(amax);
  const float inv = 1.0f / scale;
  for (int c = threadIdx.x * 8; c < k; c += 256 * 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(xr + c);
    const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
    unsigned packed[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      packed[j] = unsigned(flare_fp8_pack2(flare_bf16_lo(words[2 * j]) * inv, flare_bf16_hi(words[2 * j]) * inv)) |
                  (unsigned(flare_fp8_pack2(flare_bf16_lo(words[2 * j + 1]) * inv,
                                            flare_bf16_hi(words[2 * j + 1]) * inv))
                   << 16);
    }
    *reinterpret_cast<uint2*>(q + (long long)row * k + c) = make_uint2(packed[0], packed[1]);
  }
  if (threadIdx.x == 0) scales[row] = scale;
}

// ---------------------------------------------------------------------------------------------
// The skinny kernel: the BF16 skinny GEMM's work split (kernels/skinny_gemm.cu) over 16-byte
// chunks of 16 weights. A block of 4 warps owns (4 / KW) groups of R weight rows; the KW warps of a
// group split k; each thread keeps U x R chunk loads in flight; sums go over the warp, then the
// group's warps through shared memory, in a fixed order.

constexpr int k_fp8_skinny_threads = 128;
constexpr int k_fp8_skinny_warps = k_fp8_skinny_threads / 32;

__device__ __forceinline__ uint4 flare_fp8_load_w(const unsigned char* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Four E4M3 of a word (byte j is element j) as F32 times 2^-120 (see the header comment).
__device__ __forceinline__ void flare_fp8_widen4(unsigned w, float (&f)[4]) {
  constexpr unsigned keep = 0x87f00000u;  // sign, the low 4 exponent bits, 3 mantissa bits
  f[0] = __uint_as_float(unsigned(int(w << 24) >> 4) & keep);
  f[1] = __uint_as_float(unsigned(int(w << 16) >> 4) & keep);
  f[2] = __uint_as_float(unsigned(int(w << 8) >> 4) & keep);
  f[3] = __uint_as_float(unsigned(int(w) >> 4) & keep);
}

__device__ __forceinline__ float flare_fp8_dot16(const float (&xf)[16], uint4 w) {
  const unsigned words[4] = {w.x, w.y, w.z, w.w};
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float f[4];
    flare_fp8_widen4(words[j], f);
#pragma unroll
    for (int e = 0; e < 4; ++e) acc = fmaf(xf[4 * j + e], f[e], acc);
  }
  return acc;
}

__device__ __forceinline__ void flare_fp8_store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ void flare_fp8_store(float* p, float v) { *p = v; }

// Scale operands of one launch: scale(r, c) = scales[(r >> row_shift) * scale_cols + (c >> col_shift)].
struct FlareFp8Scales {
  const float* scales;
  int scale_cols, row_shift, col_shift;
};

template <int R, int U, bool TAIL, bool BLOCKS>
__device__ __forceinline__ void flare_fp8_load_pass(const unsigned char* const (&w_rows)[R],
                                                    const float* const (&s_rows)[R], int col_shift, int c0, int step,
                                                    int n_chunks, uint4 (&wv)[U][R], float (&sv)[U][R]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = c0 + u * step;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const bool live = !TAIL || c < n_chunks;
      wv[u][r] = live ? flare_fp8_load_w(w_rows[r] + (long long)c * 16) : make_uint4(0, 0, 0, 0);
      if (BLOCKS) sv[u][r] = live ? __ldg(s_rows[r] + ((c * 16) >> col_shift)) : 0.0f;
    }
  }
}

template <int M, int R, int U, bool TAIL, bool BLOCKS>
__device__ __forceinline__ void flare_fp8_use_pass(const uint4 (&wv)[U][R], const float (&sv)[U][R],
                                                   const __nv_bfloat16* const (&x_rows)[M], int c0, int step,
                                                   int n_chunks, float (&acc)[M][R]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = c0 + u * step;
    if (TAIL && c >= n_chunks) break;
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const uint4* xp = reinterpret_cast<const uint4*>(x_rows[i] + (long long)c * 16);
      const uint4 a = __ldg(xp), b = __ldg(xp + 1);
      const float xf[16] = {flare_bf16_lo(a.x), flare_bf16_hi(a.x), flare_bf16_lo(a.y), flare_bf16_hi(a.y),
                            flare_bf16_lo(a.z), flare_bf16_hi(a.z), flare_bf16_lo(a.w), flare_bf16_hi(a.w),
                            flare_bf16_lo(b.x), flare_bf16_hi(b.x), flare_bf16_lo(b.y), flare_bf16_hi(b.y),
                            flare_bf16_lo(b.z), flare_bf16_hi(b.z), flare_bf16_lo(b.w), flare_bf16_hi(b.w)};
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float dot = flare_fp8_dot16(xf, wv[u][r]);
        acc[i][r] = BLOCKS ? fmaf(dot, sv[u][r], acc[i][r]) : acc[i][r] + dot;
      }
    }
  }
}

// M: x rows computed (>= m); KW: warps splitting one group's k; R: weight rows per group; U: chunks
// per row in flight; BLOCKS: scales vary along k (else one per row, applied once at the end).
template <int M, int KW, int R, int U, bool BLOCKS, typename Out>
__device__ __forceinline__ void flare_fp8_skinny(const __nv_bfloat16* __restrict__ x, long long x_stride,
                                                 const unsigned char* __restrict__ w, long long w_stride,
                                                 FlareFp8Scales s, const float* __restrict__ bias,
                                                 Out* __restrict__ out, long long out_stride, int m, int n, int k) {
  constexpr int groups = k_fp8_skinny_warps / KW;
  constexpr int group_threads = KW * 32;
  constexpr int values = M * R;
  __shared__ float partial[k_fp8_skinny_warps][values];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = warp / KW;
  const int part = (warp % KW) * 32 + lane;
  const long long row0 = ((long long)blockIdx.x * groups + group) * R;
  const int n_chunks = k / 16;

  const unsigned char* w_rows[R];
  const float* s_rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const long long row = row0 + r < n ? row0 + r : (long long)n - 1;
    w_rows[r] = w + row * w_stride;
    s_rows[r] = s.scales + (row >> s.row_shift) * s.scale_cols;
  }
  const __nv_bfloat16* x_rows[M];
#pragma unroll
  for (int i = 0; i < M; ++i) x_rows[i] = x + (long long)(i < m ? i : m - 1) * x_stride;

  float acc[M][R];
#pragma unroll
  for (int i = 0; i < M; ++i) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[i][r] = 0.0f;
  }

  int c0 = part;
  uint4 wv[U][R];
  float sv[U][R];
  const bool first_full = c0 + (U - 1) * group_threads < n_chunks;
  if (first_full) {
    flare_fp8_load_pass<R, U, false, BLOCKS>(w_rows, s_rows, s.col_shift, c0, group_threads, n_chunks, wv, sv);
  } else {
    flare_fp8_load_pass<R, U, true, BLOCKS>(w_rows, s_rows, s.col_shift, c0, group_threads, n_chunks, wv, sv);
  }
  flare_pdl_wait();
  if (!first_full) {
    flare_fp8_use_pass<M, R, U, true, BLOCKS>(wv, sv, x_rows, c0, group_threads, n_chunks, acc);
  } else {
    flare_fp8_use_pass<M, R, U, false, BLOCKS>(wv, sv, x_rows, c0, group_threads, n_chunks, acc);
    for (c0 += group_threads * U; c0 + (U - 1) * group_threads < n_chunks; c0 += group_threads * U) {
      flare_fp8_load_pass<R, U, false, BLOCKS>(w_rows, s_rows, s.col_shift, c0, group_threads, n_chunks, wv, sv);
      flare_fp8_use_pass<M, R, U, false, BLOCKS>(wv, sv, x_rows, c0, group_threads, n_chunks, acc);
    }
    if (c0 < n_chunks) {
      flare_fp8_load_pass<R, U, true, BLOCKS>(w_rows, s_rows, s.col_shift, c0, group_threads, n_chunks, wv, sv);
      flare_fp8_use_pass<M, R, U, true, BLOCKS>(wv, sv, x_rows, c0, group_threads, n_chunks, acc);
    }
  }

#pragma unroll
  for (int i = 0; i < M; ++i) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) acc[i][r] += __shfl_xor_sync(0xffffffffu, acc[i][r], offset);
      if (lane == (i * R + r) % 32) partial[warp][i * R + r] = acc[i][r];
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t < groups * values; t += k_fp8_skinny_threads) {
    const int g = t / values, v = t % values;
    const int i = v / R, r = v % R;
    const long long row = ((long long)blockIdx.x * groups + g) * R + r;
    if (i >= m || row >= n) continue;
    float sum = 0.0f;
#pragma unroll
    for (int p = 0; p < KW; ++p) sum += partial[g * KW + p][v];
    sum *= k_fp8_widen_scale;
    if (!BLOCKS) sum *= s.scales[(row >> s.row_shift) * s.scale_cols];
    if (bias) sum += bias[row];
    flare_fp8_store(out + (long long)i * out_stride + row, sum);
  }
}

// Entry points flare_fp8_linear_skinny_m<M>_v<V>_<blocks|rows>: M in {1, 2, 4, 8} the x-row tile, V the
// variant (KW, R, U), rows per block (4 / KW) x R, kept in step with cuda/skinny_gemm.h:
//   v0 (4, 1, 4): one row per block   v1 (4, 2, 2): two rows   v2 (1, 1, 4): 4 rows   v3 (1, 2, 2): 8 rows
// grid (ceil(n / rows per block)), block 128; BF16 output. Requires k % 16 == 0, x rows and w rows
// 16-byte aligned.
#define FLARE_FP8_SKINNY_ENTRY(M, V, KW, R, U, MODE, BLOCKS)                                                        \
  extern "C" __global__ void __launch_bounds__(k_fp8_skinny_threads) flare_fp8_linear_skinny_m##M##_v##V##_##MODE(          \
      const __nv_bfloat16* x, long long x_stride, const unsigned char* w, long long w_stride, const float* scales,   \
      int scale_cols, int row_shift, int col_shift, const float* bias, __nv_bfloat16* out, long long out_stride,    \
      int m, int n, int k) {                                                                                         \
    flare_pdl_trigger();                                                                                             \
    flare_fp8_skinny<M, KW, R, U, BLOCKS, __nv_bfloat16>(x, x_stride, w, w_stride,                                  \
                                                         FlareFp8Scales{scales, scale_cols, row_shift, col_shift},   \
                                                         bias, out, out_stride, m, n, k);                            \
  }

#define FLARE_FP8_SKINNY_VARIANTS(M, MODE, BLOCKS)      \
  FLARE_FP8_SKINNY_ENTRY(M, 0, 4, 1, 4, MODE, BLOCKS) \
  FLARE_FP8_SKINNY_ENTRY(M, 1, 4, 2, 2, MODE, BLOCKS) \
  FLARE_FP8_SKINNY_ENTRY(M, 2, 1, 1, 4, MODE, BLOCKS) \
  FLARE_FP8_SKINNY_ENTRY(M, 3, 1, 2, 2, MODE, BLOCKS)

#define FLARE_FP8_SKINNY_TILE(M)              \
  FLARE_FP8_SKINNY_VARIANTS(M, blocks, true) \
  FLARE_FP8_SKINNY_VARIANTS(M, rows, false)

// Defines: FP8_SKINNY_M (optional): only that tile's skinny entry points (the host compiles one
// module per tile, in parallel; the quantization kernels are in every module).
#ifdef FP8_SKINNY_M
#if FP8_SKINNY_M != 1 && FP8_SKINNY_M != 2 && FP8_SKINNY_M != 4 && FP8_SKINNY_M != 8
#error "fp8_linear: FP8_SKINNY_M must be 1, 2, 4 or 8"
#endif
FLARE_FP8_SKINNY_TILE(FP8_SKINNY_M)
#else
FLARE_FP8_SKINNY_TILE(1)
FLARE_FP8_SKINNY_TILE(2)
FLARE_FP8_SKINNY_TILE(4)
FLARE_FP8_SKINNY_TILE(8)
#endif
