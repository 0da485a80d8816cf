// Element types the runtime computes with, and scalar conversions between them. The conversions
// are the reference semantics every backend follows: BF16 and FP16 round to nearest even, FP8
// E4M3 (OCP "fn" variant: no infinities, max 448) saturates and rounds to nearest even.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace flare::helios {

// u8: raw bytes (MXFP4 values two a byte, E8M0 scales).
enum class DType : std::uint8_t { f32, bf16, f16, f8_e4m3, i32, u8 };

constexpr std::size_t dtype_size_bytes(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::f8_e4m3: return 1;
    case DType::i32: return 4;
    case DType::u8: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType dtype);

inline float bits_to_f32(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}
inline std::uint32_t f32_to_bits(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

inline float bf16_to_f32(std::uint16_t bits) { return bits_to_f32(std::uint32_t(bits) << 16); }

inline std::uint16_t f32_to_bf16(float value) {
  std::uint32_t bits = f32_to_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((bits >> 16) | 0x40);  // quiet NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return std::uint16_t(bits >> 16);
}

float f16_to_f32(std::uint16_t bits);
std::uint16_t f32_to_f16(float value);
float f8_e4m3_to_f32(std::uint8_t bits);
std::uint8_t f32_to_f8_e4m3(float value);

}  // namespace flare::helios
