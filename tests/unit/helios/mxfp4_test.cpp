// MXFP4 decoding (helios/mxfp4.h) against the OCP definition: every E2M1 nibble, E8M0 exponents at
// the ends of their range, the nibble order within a byte; and the CPU backend's MXFP4 experts equal
// BF16 experts holding the decoded values bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "helios/cpu/cpu_backend.h"
#include "helios/mxfp4.h"

namespace flare::helios {
namespace {

TEST(Mxfp4, EveryNibbleIsItsE2M1Value) {
  // sign | exponent (2 bits) | mantissa (1 bit); exponent 0 is subnormal (0 or 0.5).
  for (int n = 0; n < 16; ++n) {
    const int sign = n >> 3, exponent = (n >> 1) & 3, mantissa = n & 1;
    const double magnitude = exponent == 0 ? 0.5 * mantissa : std::ldexp(1.0 + 0.5 * mantissa, exponent - 1);
    EXPECT_EQ(double(mxfp4_e2m1(std::uint8_t(n))), sign ? -magnitude : magnitude) << n;
  }
  EXPECT_TRUE(std::signbit(mxfp4_e2m1(8)));  // -0
}

TEST(Mxfp4, ScalesArePowersOfTwoAndTheLowNibbleComesFirst) {
  EXPECT_EQ(mxfp4_scale(127), 1.0f);
  EXPECT_EQ(mxfp4_scale(130), 8.0f);
  EXPECT_EQ(mxfp4_scale(120), 1.0f / 128);
  EXPECT_EQ(mxfp4_scale(254), std::ldexp(1.0f, 127));
  EXPECT_EQ(mxfp4_scale(1), std::ldexp(1.0f, -126));
  std::vector<std::uint8_t> values(32), scales = {128, 126};
  values[0] = 0x71;   // element 0: 0x1 (0.5), element 1: 0x7 (6)
  values[16] = 0xa3;  // element 32: 0x3 (1.5), element 33: 0xa (-1)
  std::vector<float> out(64);
  mxfp4_decode_row(values.data(), scales.data(), 64, out.data());
  EXPECT_EQ(out[0], 1.0f);   // 0.5 * 2
  EXPECT_EQ(out[1], 12.0f);  // 6 * 2
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_EQ(out[32], 0.75f);  // 1.5 / 2
  EXPECT_EQ(out[33], -0.5f);
}

TEST(Mxfp4, CpuExpertsEqualBf16ExpertsOfTheDecodedValues) {
  const std::int64_t n_experts = 3, hidden = 64, inter = 32, n = 5, k = 2;
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> byte(0, 255), exponent(120, 128);
  auto make = [&](std::int64_t rows, std::int64_t cols, std::vector<std::uint8_t>& values,
                  std::vector<std::uint8_t>& scales, std::vector<std::uint16_t>& decoded) {
    values.resize(std::size_t(n_experts * rows * cols / 2));
    scales.resize(std::size_t(n_experts * rows * cols / 32));
    for (auto& v : values) v = std::uint8_t(byte(rng));
    for (auto& s : scales) s = std::uint8_t(exponent(rng));
    decoded.resize(std::size_t(n_experts * rows * cols));
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t r = 0; r < n_experts * rows; ++r) {
      mxfp4_decode_row(&values[std::size_t(r * cols / 2)], &scales[std::size_t(r * cols / 32)], cols, row.data());
      for (std::int64_t c = 0; c < cols; ++c) {
        decoded[std::size_t(r * cols + c)] = f32_to_bf16(row[std::size_t(c)]);
        ASSERT_EQ(bf16_to_f32(decoded[std::size_t(r * cols + c)]), row[std::size_t(c)]) << "not a BF16 value";
      }
    }
  };
  std::vector<std::uint8_t> gu_values, gu_scales, d_values, d_scales;
  std::vector<std::uint16_t> gu_decoded, d_decoded;
  make(2 * inter, hidden, gu_values, gu_scales, gu_decoded);
  make(hidden, inter, d_values, d_scales, d_decoded);
  auto stack = [&](void* data, DType dtype, std::int64_t rows, std::int64_t cols) {
    return Tensor{data, dtype, rows, cols, cols, n_experts, rows * cols};
  };
  MoeExperts mxfp4, bf16;
  mxfp4.gate_up = stack(gu_values.data(), DType::u8, 2 * inter, hidden / 2);
  mxfp4.gate_up_quant = {QuantizedWeight::Format::mxfp4, stack(gu_scales.data(), DType::u8, 2 * inter, hidden / 32), 1, 32};
  mxfp4.down = stack(d_values.data(), DType::u8, hidden, inter / 2);
  mxfp4.down_quant = {QuantizedWeight::Format::mxfp4, stack(d_scales.data(), DType::u8, hidden, inter / 32), 1, 32};
  bf16.gate_up = stack(gu_decoded.data(), DType::bf16, 2 * inter, hidden);
  bf16.down = stack(d_decoded.data(), DType::bf16, hidden, inter);
  mxfp4.activation = bf16.activation = GatedActivation::clamped_silu;
  std::vector<float> x(std::size_t(n * hidden)), weights = {0.6f, 0.4f, 0.5f, 0.5f, 0.9f, 0.1f, 0.3f, 0.7f, 1.0f, 0.0f};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : x) v = normal(rng);
  std::vector<std::int32_t> ids = {0, 1, 2, 0, 1, 2, 0, 2, 1, 0};
  auto run = [&](const MoeExperts& experts) {
    cpu::CpuBackend backend(2);
    std::vector<float> gate_up(std::size_t(n * k * 2 * inter)), act(std::size_t(n * k * inter)),
        pair_out(std::size_t(n * k * hidden)), out(std::size_t(n * hidden));
    const MoeScratch scratch{{gate_up.data(), DType::f32, n * k, 2 * inter, 2 * inter},
                             {act.data(), DType::f32, n * k, inter, inter},
                             {pair_out.data(), DType::f32, n * k, hidden, hidden}};
    backend.moe_experts({x.data(), DType::f32, n, hidden, hidden}, {ids.data(), DType::i32, n, k, k},
                        {weights.data(), DType::f32, n, k, k}, experts, scratch, {out.data(), DType::f32, n, hidden, hidden});
    return out;
  };
  EXPECT_EQ(run(mxfp4), run(bf16));
}

}  // namespace
}  // namespace flare::helios
