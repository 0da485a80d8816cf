// Scalar conversions for FP16 and FP8 E4M3 (see dtype.h for the rounding rules).
#include "helios/dtype.h"

#include <cmath>

namespace flare::helios {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::f8_e4m3: return "f8_e4m3";
    case DType::i32: return "i32";
    case DType::u8: return "u8";
  }
  return "?";
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1f;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    if (mantissa == 0) return bits_to_f32(sign);
    float value = std::ldexp(float(mantissa), -24);  // subnormal
    return sign ? -value : value;
  }
  if (exponent == 31) return bits_to_f32(sign | 0x7f800000u | (mantissa << 13));
  return bits_to_f32(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::uint16_t f32_to_f16(float value) {
  const std::uint32_t bits = f32_to_bits(value);
  const std::uint16_t sign = std::uint16_t((bits >> 16) & 0x8000u);
  if (std::isnan(value)) return sign | 0x7e00u;
  const float magnitude = std::fabs(value);
  if (magnitude >= 65520.0f) return sign | 0x7c00u;  // rounds to infinity
  if (magnitude < 6.103515625e-05f) {                 // subnormal range: multiples of 2^-24
    return sign | std::uint16_t(std::nearbyint(magnitude * 16777216.0f));
  }
  std::uint32_t rounded = (bits & 0x7fffffffu) + 0xfffu + ((bits >> 13) & 1u);
  return sign | std::uint16_t(((rounded >> 23) - 112) << 10 | ((rounded >> 13) & 0x3ffu));
}

float f8_e4m3_to_f32(std::uint8_t bits) {
  const bool negative = bits & 0x80u;
  const int exponent = (bits >> 3) & 0xf;
  const int mantissa = bits & 0x7;
  float value;
  if (exponent == 15 && mantissa == 7) {
    value = NAN;
  } else if (exponent == 0) {
    value = std::ldexp(float(mantissa), -9);
  } else {
    value = std::ldexp(float(8 + mantissa), exponent - 10);
  }
  return negative ? -value : value;
}

std::uint8_t f32_to_f8_e4m3(float value) {
  if (std::isnan(value)) return 0x7f;
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0;
  float magnitude = std::fabs(value);
  if (magnitude >= 448.0f) return sign | 0x7e;  // saturate to the largest finite value
  if (magnitude < std::ldexp(1.0f, -6)) {       // subnormal: multiples of 2^-9
    return sign | std::uint8_t(std::nearbyint(std::ldexp(magnitude, 9)));
  }
  int exponent;
  std::frexp(magnitude, &exponent);  // magnitude = m * 2^exponent, m in [0.5, 1)
  // 3 mantissa bits: quantum is 2^(exponent - 4).
  float quantized = std::ldexp(std::nearbyint(std::ldexp(magnitude, 4 - exponent)), exponent - 4);
  if (quantized >= 448.0f) return sign | 0x7e;
  std::frexp(quantized, &exponent);
  const int biased = exponent - 1 + 7;
  const int mantissa = int(std::ldexp(quantized, 4 - exponent)) - 8;
  return sign | std::uint8_t(biased << 3) | std::uint8_t(mantissa);
}

}  // namespace flare::helios
