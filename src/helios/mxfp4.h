// MXFP4 (OCP microscaling FP4, as gpt-oss checkpoints store their experts): E2M1 values two a byte,
// element 2j in the low nibble, with one E8M0 exponent per block of 32 values. The reference
// decoding every backend follows (QuantizedWeight in backend.h).
#pragma once

#include <cmath>
#include <cstdint>

namespace flare::helios {

inline constexpr std::int32_t k_mxfp4_block = 32;

// The value of an E2M1 nibble: sign, two exponent bits, one mantissa bit.
inline float mxfp4_e2m1(std::uint8_t nibble) {
  constexpr float k_values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return k_values[nibble & 0xf];
}

// 2^(e - 127) for an E8M0 byte.
inline float mxfp4_scale(std::uint8_t e8m0) { return std::ldexp(1.0f, int(e8m0) - 127); }

// Decodes one row of n values (n a multiple of 32) from n / 2 value bytes and n / 32 scales.
inline void mxfp4_decode_row(const std::uint8_t* values, const std::uint8_t* scales, std::int64_t n, float* out) {
  for (std::int64_t j = 0; j < n; j += 2) {
    const float scale = mxfp4_scale(scales[j / k_mxfp4_block]);
    const std::uint8_t byte = values[j / 2];
    out[j] = mxfp4_e2m1(byte & 0xf) * scale;
    out[j + 1] = mxfp4_e2m1(byte >> 4) * scale;
  }
}

}  // namespace flare::helios
