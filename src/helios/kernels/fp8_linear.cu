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
// blocks of one row; grid (m, ceil(k / 1024)). q [m, k] contiguous; scales[(c / 128) * m + row]
// (column-major, as cuBLASLt's VEC128_32F reads them; it takes only m % 4 == 0, so the columns
// are 16-byte aligned where it reads them).
// Requires k % 128 == 0 and 8-byte aligned x rows.
extern "C" __global__ void __launch_bounds__(256) flare_fp8_linear_quantize_blocks(const __nv_bfloat16* __restrict__ x,
                                                                           long long x_stride,
                                                                           unsigned char* __restrict__ q,
                                                                           float* __restrict__ scales, int m, int k) {
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
  if (lane == 0) scales[(long long)block * m + row] = scale;
}

// One block per row: the row's amax, then its quantization with one scale. Block 256 threads;
// grid (m). q [m, k] contiguous; scales[row]. Requires k % 8 == 0 and 16-byte aligned x rows.
extern "C" __global__ void __launch_bounds__(256) flare_fp8_linear_quantize_rows(const __nv_bfloat16* __restrict__ x,
                                                                         long long x_stride,
                                                                         unsigned char* __restrict__ q,
                                                                         float* __restrict__ scales, int m, int k) {
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

// ---------------------------------------------------------------------------------------------
// The tensor-core decode kernel: the same GEMM for m <= 8 NT on FP8 activations (quantized first,
// as for cuBLASLt), with mma.sync m16n8k32 e4m3 (sm_89+). Weights are loaded from global memory
// straight into the registers the mma reads, several k steps ahead, with no shared memory: a dot
// product does not care in which order it visits k, so thread (g = lane / 4, t = lane % 4) loads 16
// contiguous bytes of weight rows g and g + 8 at k 16t of a 64-element step, and reads activation
// bytes of token g at the same offsets. Of those 16 bytes, the first 8 feed the step's first mma
// (its k 4t..4t+3 and 16+4t..16+4t+3) and the last 8 its second. Weights stream at a few
// instructions per 1 KB, where the CUDA-core kernel above spends three per weight.
//
// Work split as the skinny kernel: a block of 4 warps owns (4 / KW) tiles of 16 rows; the KW warps
// of a tile split its k in units of 128 (warp j takes units j, j + KW, ...); sums go through shared
// memory in a fixed order. Block scales: each 128-element block accumulates apart, then adds in times its
// weight and activation scales (F32 accumulation across blocks, as cuBLASLt's block scaling does);
// row scales apply once at the end.
//
// Requires k % 128 == 0 and 16-byte aligned w rows; xq [m, k] e4m3 contiguous and xs as the
// quantization kernels write them. Quantizing inside this kernel instead (the
// 4 lanes of a group hold a token's 128-element block over a unit's two steps) was slower on the
// H200: every row tile re-quantizes the same activations (batch 4 step 3.96 against 3.75 ms).

__device__ __forceinline__ void flare_fp8_mma(float (&c)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                              unsigned b0, unsigned b1) {
#if __CUDA_ARCH__ >= 890
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
  __trap();  // the host never picks this kernel below sm_89
#endif
}

template <int NT, int KW, int U, bool BLOCKS>
__device__ __forceinline__ void flare_fp8_mma_gemm(const unsigned char* __restrict__ xq,
                                                   const float* __restrict__ xs,
                                                   const unsigned char* __restrict__ w, long long w_stride,
                                                   FlareFp8Scales s, const float* __restrict__ bias,
                                                   __nv_bfloat16* __restrict__ out, long long out_stride, int m, int n,
                                                   int k) {
  constexpr int tiles = k_fp8_skinny_warps / KW;
  __shared__ float partial[k_fp8_skinny_warps][NT][32][4];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int tile = warp / KW, part = warp % KW;
  const long long row0 = ((long long)blockIdx.x * tiles + tile) * 16;
  const long long r_lo = row0 + g < n ? row0 + g : (long long)n - 1;
  const long long r_hi = row0 + g + 8 < n ? row0 + g + 8 : (long long)n - 1;
  const unsigned char* w_lo = w + r_lo * w_stride + 16 * t;
  const unsigned char* w_hi = w + r_hi * w_stride + 16 * t;
  const float* w_scales = s.scales + (r_lo >> 7) * s.scale_cols;  // blocks: rows g and g + 8 share a row block
  const unsigned char* x_rows[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int token = 8 * j + g;
    x_rows[j] = xq + (long long)(token < m ? token : m - 1) * k + 16 * t;
  }
  // Units of 128 elements (two 64-element steps, one scale block); warp `part` of a tile takes
  // units part, part + KW, ...
  const int units = k / 128;

  float acc[NT][4], blk[NT][4];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = blk[j][e] = 0.0f;
  }

  // Rows g and g + 8 of a unit's first step, then of its second.
  const auto load_unit = [&](long long unit, uint4 (&dst)[4]) {
    dst[0] = flare_fp8_load_w(w_lo + unit * 128);
    dst[1] = flare_fp8_load_w(w_hi + unit * 128);
    dst[2] = flare_fp8_load_w(w_lo + unit * 128 + 64);
    dst[3] = flare_fp8_load_w(w_hi + unit * 128 + 64);
  };
  uint4 a[U][4];  // per unit in flight
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (part + u * KW < units) load_unit(part + u * KW, a[u]);
  }
  flare_pdl_wait();
  for (int unit0 = part; unit0 < units; unit0 += KW * U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int unit = unit0 + u * KW;
      if (unit < units) {
        const uint4 v[4] = {a[u][0], a[u][1], a[u][2], a[u][3]};
        if (unit + U * KW < units) load_unit(unit + U * KW, a[u]);
        uint4 b[NT][2];
#pragma unroll
        for (int j = 0; j < NT; ++j) {
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            b[j][half] = __ldg(reinterpret_cast<const uint4*>(x_rows[j] + (long long)unit * 128 + half * 64));
          }
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const uint4 lo = v[2 * half], hi = v[2 * half + 1];
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            float (&c)[4] = BLOCKS ? blk[j] : acc[j];
            flare_fp8_mma(c, lo.x, hi.x, lo.y, hi.y, b[j][half].x, b[j][half].y);
            flare_fp8_mma(c, lo.z, hi.z, lo.w, hi.w, b[j][half].z, b[j][half].w);
          }
        }
        if (BLOCKS) {
          const float ws = __ldg(w_scales + unit);
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            const int tok = 8 * j + 2 * t;  // the C fragment's tokens: tok, tok + 1
            const float x0 = __ldg(xs + (long long)unit * m + (tok < m ? tok : m - 1));
            const float x1 = __ldg(xs + (long long)unit * m + (tok + 1 < m ? tok + 1 : m - 1));
            acc[j][0] = fmaf(blk[j][0], ws * x0, acc[j][0]);
            acc[j][1] = fmaf(blk[j][1], ws * x1, acc[j][1]);
            acc[j][2] = fmaf(blk[j][2], ws * x0, acc[j][2]);
            acc[j][3] = fmaf(blk[j][3], ws * x1, acc[j][3]);
            blk[j][0] = blk[j][1] = blk[j][2] = blk[j][3] = 0.0f;
          }
        }
      }
    }
  }

#pragma unroll
  for (int j = 0; j < NT; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp][j][lane][e] = acc[j][e];
  }
  __syncthreads();
  // Thread i of the block finishes value (tile, j, lane, e) = i, i + 128, ...
  for (int i = threadIdx.x; i < tiles * NT * 32 * 4; i += k_fp8_skinny_threads) {
    const int e = i % 4, l = (i / 4) % 32, j = (i / 128) % NT, tl = i / (128 * NT);
    const long long row = ((long long)blockIdx.x * tiles + tl) * 16 + l / 4 + (e >= 2 ? 8 : 0);
    const int token = 8 * j + 2 * (l % 4) + (e & 1);
    if (row >= n || token >= m) continue;
    float sum = 0.0f;
#pragma unroll
    for (int p = 0; p < KW; ++p) sum += partial[tl * KW + p][j][l][e];
    if (!BLOCKS) sum *= s.scales[row] * xs[token];
    if (bias) sum += bias[row];
    out[(long long)token * out_stride + row] = __float2bfloat16(sum);
  }
}

// Entry points flare_fp8_linear_mma_m<NT>_v<V>_<blocks|rows> (NT n-tiles of 8 tokens): V (KW, U),
// rows per block (4 / KW) x 16: v0 (4, 2) 16 rows   v1 (2, 2) 32 rows   v2 (1, 2) 64 rows
// v3 (4, 1) 16 rows.
// grid (ceil(n / rows per block)), block 128.
#define FLARE_FP8_MMA_ENTRY(NT, V, KW, U, MODE, BLOCKS)                                                            \
  extern "C" __global__ void __launch_bounds__(k_fp8_skinny_threads) flare_fp8_linear_mma_m##NT##_v##V##_##MODE(   \
      const unsigned char* xq, const float* xs, const unsigned char* w, long long w_stride,                       \
      const float* scales, int scale_cols, const float* bias, __nv_bfloat16* out, long long out_stride, int m,     \
      int n, int k) {                                                                                              \
    flare_pdl_trigger();                                                                                           \
    flare_fp8_mma_gemm<NT, KW, U, BLOCKS>(xq, xs, w, w_stride, FlareFp8Scales{scales, scale_cols, 7, 7},           \
                                          bias, out, out_stride, m, n, k);                                        \
  }

#define FLARE_FP8_MMA_VARIANTS(NT, MODE, BLOCKS)      \
  FLARE_FP8_MMA_ENTRY(NT, 0, 4, 2, MODE, BLOCKS) \
  FLARE_FP8_MMA_ENTRY(NT, 1, 2, 2, MODE, BLOCKS) \
  FLARE_FP8_MMA_ENTRY(NT, 2, 1, 2, MODE, BLOCKS) \
  FLARE_FP8_MMA_ENTRY(NT, 3, 4, 1, MODE, BLOCKS)

// Defines: FP8_SKINNY_M (optional): only that tile's skinny entry points (the host compiles one
// module per tile, in parallel; the quantization kernels are in every module).
// The tensor-core entries go with tiles 1 (NT 1: m <= 8) and 2 (NT 2: m <= 16).
#define FLARE_FP8_MMA_TILE(NT)              \
  FLARE_FP8_MMA_VARIANTS(NT, blocks, true) \
  FLARE_FP8_MMA_VARIANTS(NT, rows, false)

#ifdef FP8_SKINNY_M
#if FP8_SKINNY_M != 1 && FP8_SKINNY_M != 2 && FP8_SKINNY_M != 4 && FP8_SKINNY_M != 8
#error "fp8_linear: FP8_SKINNY_M must be 1, 2, 4 or 8"
#endif
FLARE_FP8_SKINNY_TILE(FP8_SKINNY_M)
#if FP8_SKINNY_M <= 2
FLARE_FP8_MMA_TILE(FP8_SKINNY_M)
#endif
#else
FLARE_FP8_SKINNY_TILE(1)
FLARE_FP8_SKINNY_TILE(2)
FLARE_FP8_SKINNY_TILE(4)
FLARE_FP8_SKINNY_TILE(8)
FLARE_FP8_MMA_TILE(1)
FLARE_FP8_MMA_TILE(2)
#endif
