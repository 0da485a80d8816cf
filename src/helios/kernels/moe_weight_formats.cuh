// Mixture-of-experts weight formats (moe_experts.cu): how a product's expert weight stack is laid
// out (FlareMoeWeights), MXFP4 and FP8 (E4M3) values decoded in registers, and the GEMV's 16-byte
// chunk loads and dot products over BF16, MXFP4 and FP8 chunks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

// The weight stack of one product: BF16 rows of k_dim values, or MXFP4 rows of k_dim / 2 value
// bytes and k_dim / 32 scale bytes (strides in elements of w: bf16 values or bytes).
// FP8: rows of k_dim E4M3 bytes, F32 scales (strides in floats) of blocks of block_rows x
// 2^block_cols_log2 values.
struct FlareMoeWeights {
  const void* w;
  long long w_stride, w_expert_stride;
  const unsigned char* scales;  // MXFP4 (u8) and FP8 (f32) only
  long long s_stride, s_expert_stride;
  int block_rows, block_cols_log2;  // FP8 only
};

// ---------------------------------------------------------------------------------------------
// MXFP4 decoding.

// 2^(e - 127) for an E8M0 scale byte (e = 0: the subnormal 2^-127; e = 255, OCP's NaN: +inf, as
// the CPU's ldexp gives).
__device__ __forceinline__ float flare_e8m0(unsigned e) {
  return e == 0 ? __int_as_float(0x00400000) : __int_as_float(int(e << 23));
}

// Nibbles i and i + 4 (bits [4i, 4i + 4) and [4i + 16, 4i + 20)) of 8 E2M1 values `w`, as floats
// of their value times 2^-14: each nibble's exponent and mantissa bits go to the bottom of an f16's
// exponent and the top of its mantissa (E2M1's exponent bias is 1, f16's 15; E2M1's subnormal
// 0.5 is f16's subnormal 2^-15), the sign to the f16's sign, and f16 -> f32 is exact. The pairing
// does not follow element order; a dot product does not care as long as x is paired the same way.
template <int I>
__device__ __forceinline__ float2 flare_e2m1x2(unsigned w) {
  const unsigned sign = (w << (12 - 4 * I)) & 0x80008000u;
  const unsigned magnitude = (I < 3 ? w << (9 - 4 * I) : w >> (4 * I - 9)) & 0x0e000e00u;
  const unsigned h2 = sign | magnitude;
  return __half22float2(*reinterpret_cast<const __half2*>(&h2));
}
constexpr float k_e2m1_unscale = 16384.0f;  // 2^14: flare_e2m1x2's values times this are E2M1's

// ---------------------------------------------------------------------------------------------
// FP8 (E4M3) decoding.

// Weight formats of the products (the FMT template parameter).
constexpr int k_fmt_bf16 = 0, k_fmt_mxfp4 = 1, k_fmt_fp8 = 2;

// E4M3 bytes 0 and 1 (LO) or 2 and 3 of `w`, in element order, as floats of their value times
// 2^-8: each byte's exponent and mantissa bits go to the bottom of an f16's exponent and the top of
// its mantissa (E4M3's bias is 7, f16's 15; E4M3's subnormals land on f16 subnormals), the sign to
// the f16's sign, and f16 -> f32 is exact. E4M3's NaN bytes (0x7f, 0xff) decode as +-480 *
// 2^-8; checkpoints hold none.
template <bool LO>
__device__ __forceinline__ float2 flare_e4m3x2(unsigned w) {
  const unsigned t = __byte_perm(w, 0u, LO ? 0x1404u : 0x3424u);  // the two bytes at bits 8-15, 24-31
  const unsigned h2 = (t & 0x80008000u) | ((t >> 1) & 0x3f803f80u);
  return __half22float2(*reinterpret_cast<const __half2*>(&h2));
}
constexpr float k_e4m3_unscale = 256.0f;  // 2^8: flare_e4m3x2's values times this are E4M3's

__device__ __forceinline__ uint4 flare_moe_load_w(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}
__device__ __forceinline__ float flare_lo(unsigned u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float flare_hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); }
__device__ __forceinline__ float flare_dot8(const float (&xf)[8], uint4 w, float acc) {
  acc = fmaf(xf[0], flare_lo(w.x), acc);
  acc = fmaf(xf[1], flare_hi(w.x), acc);
  acc = fmaf(xf[2], flare_lo(w.y), acc);
  acc = fmaf(xf[3], flare_hi(w.y), acc);
  acc = fmaf(xf[4], flare_lo(w.z), acc);
  acc = fmaf(xf[5], flare_hi(w.z), acc);
  acc = fmaf(xf[6], flare_lo(w.w), acc);
  acc = fmaf(xf[7], flare_hi(w.w), acc);
  return acc;
}

// A lane's 16-byte weight chunk: 8 BF16 values, or 32 MXFP4 values (one scale block) decoded to
// floats of value * 2^-14 in flare_e2m1x2's order: f[8q + 2i], f[8q + 2i + 1] are values 8q + i
// and 8q + i + 4.
__device__ __forceinline__ void flare_mxfp4_chunk(uint4 raw, float (&f)[32]) {
  const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    float2 p = flare_e2m1x2<0>(words[q]);
    f[8 * q + 0] = p.x, f[8 * q + 1] = p.y;
    p = flare_e2m1x2<1>(words[q]);
    f[8 * q + 2] = p.x, f[8 * q + 3] = p.y;
    p = flare_e2m1x2<2>(words[q]);
    f[8 * q + 4] = p.x, f[8 * q + 5] = p.y;
    p = flare_e2m1x2<3>(words[q]);
    f[8 * q + 6] = p.x, f[8 * q + 7] = p.y;
  }
}
// A lane's 16-byte FP8 chunk: 16 E4M3 values, in element order, each decoded to its weight
// bf16(e4m3 * scale) (as floats); `scale` is the block's F32 scale times k_e4m3_unscale.
__device__ __forceinline__ void flare_fp8_chunk(uint4 raw, float scale, float (&f)[16]) {
  const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float2 lo = flare_e4m3x2<true>(words[q]), hi = flare_e4m3x2<false>(words[q]);
    const __nv_bfloat162 r0 = __floats2bfloat162_rn(lo.x * scale, lo.y * scale);
    const __nv_bfloat162 r1 = __floats2bfloat162_rn(hi.x * scale, hi.y * scale);
    f[4 * q + 0] = __low2float(r0), f[4 * q + 1] = __high2float(r0);
    f[4 * q + 2] = __low2float(r1), f[4 * q + 3] = __high2float(r1);
  }
}
// acc + sum over 16 values of x * f, x the 16 bf16 of `xv` in element order.
__device__ __forceinline__ float flare_dot16(const uint4 (&xv)[2], const float (&f)[16], float acc) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const unsigned xw[4] = {xv[h].x, xv[h].y, xv[h].z, xv[h].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc = fmaf(flare_lo(xw[i]), f[8 * h + 2 * i], acc);
      acc = fmaf(flare_hi(xw[i]), f[8 * h + 2 * i + 1], acc);
    }
  }
  return acc;
}

// sum over the chunk's 32 values of x * f, x the 32 bf16 of `xv` in element order.
__device__ __forceinline__ float flare_dot32(const uint4 (&xv)[4], const float (&f)[32]) {
  float acc = 0.0f;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const unsigned xw[4] = {xv[q].x, xv[q].y, xv[q].z, xv[q].w};  // values 8q + 2j, 8q + 2j + 1
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float x_i = i % 2 ? flare_hi(xw[i / 2]) : flare_lo(xw[i / 2]);           // value 8q + i
      const float x_i4 = i % 2 ? flare_hi(xw[2 + i / 2]) : flare_lo(xw[2 + i / 2]);  // value 8q + i + 4
      acc = fmaf(x_i, f[8 * q + 2 * i], acc);
      acc = fmaf(x_i4, f[8 * q + 2 * i + 1], acc);
    }
  }
  return acc;
}
