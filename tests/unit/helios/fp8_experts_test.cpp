// FP8 block-scaled expert stacks (Qwen3 FP8 checkpoints) on the CPU backend: moe_experts with E4M3
// stacks and F32 block scales equals, bit for bit, moe_experts with BF16 stacks holding each value
// decoded as bf16(e4m3 * its block's scale), for 128 x 128 blocks and for blocks that leave partial
// ones at the matrix edges; the scales of each expert and block are its own (random per block, so
// a wrong block or expert index changes the output); bad scale shapes are refused.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "common/error.h"
#include "helios/cpu/cpu_backend.h"
#include "helios/dtype.h"

namespace flare::helios {
namespace {

// One FP8 stack [n_experts][rows, cols] with its scales, and its BF16 decoding.
struct Fp8Stack {
  std::int64_t n_experts = 0, rows = 0, cols = 0, block_rows = 0, block_cols = 0;
  std::vector<std::uint8_t> values;
  std::vector<float> scales;
  std::vector<std::uint16_t> decoded;

  std::int64_t scale_rows() const { return (rows + block_rows - 1) / block_rows; }
  std::int64_t scale_cols() const { return (cols + block_cols - 1) / block_cols; }

  Fp8Stack(std::int64_t e, std::int64_t r, std::int64_t c, std::int64_t br, std::int64_t bc, std::mt19937& rng)
      : n_experts(e), rows(r), cols(c), block_rows(br), block_cols(bc) {
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_real_distribution<float> scale(0.5f / 448.0f, 4.0f / 448.0f);
    values.resize(std::size_t(e * r * c));
    for (auto& v : values) {
      do v = std::uint8_t(byte(rng));
      while ((v & 0x7f) == 0x7f);  // E4M3's NaN: checkpoints hold none
    }
    scales.resize(std::size_t(e * scale_rows() * scale_cols()));
    for (auto& s : scales) s = scale(rng);
    decoded.resize(values.size());
    for (std::int64_t m = 0; m < e; ++m) {
      for (std::int64_t i = 0; i < r; ++i) {
        for (std::int64_t j = 0; j < c; ++j) {
          const std::size_t at = std::size_t((m * r + i) * c + j);
          const float s = scales[std::size_t((m * scale_rows() + i / br) * scale_cols() + j / bc)];
          decoded[at] = f32_to_bf16(f8_e4m3_to_f32(values[at]) * s);
        }
      }
    }
  }

  Tensor fp8_tensor() { return {values.data(), DType::f8_e4m3, rows, cols, cols, n_experts, rows * cols}; }
  QuantizedWeight quant() {
    return {QuantizedWeight::Format::fp8_e4m3,
            {scales.data(), DType::f32, scale_rows(), scale_cols(), scale_cols(), n_experts, scale_rows() * scale_cols()},
            std::int32_t(block_rows), std::int32_t(block_cols)};
  }
  Tensor bf16_tensor() { return {decoded.data(), DType::bf16, rows, cols, cols, n_experts, rows * cols}; }
};

struct Step {
  std::int64_t n = 0, k = 0, hidden = 0, inter = 0;
  std::vector<float> x, weights;
  std::vector<std::int32_t> ids;
};

std::vector<float> run(const Step& s, const MoeExperts& experts) {
  cpu::CpuBackend backend(2);
  const std::int64_t pairs = s.n * s.k;
  std::vector<float> gate_up(std::size_t(pairs * 2 * s.inter)), act(std::size_t(pairs * s.inter)),
      pair_out(std::size_t(pairs * s.hidden)), out(std::size_t(s.n * s.hidden));
  const MoeScratch scratch{{gate_up.data(), DType::f32, pairs, 2 * s.inter, 2 * s.inter},
                           {act.data(), DType::f32, pairs, s.inter, s.inter},
                           {pair_out.data(), DType::f32, pairs, s.hidden, s.hidden}};
  auto x = s.x;
  auto ids = s.ids;
  auto weights = s.weights;
  backend.moe_experts({x.data(), DType::f32, s.n, s.hidden, s.hidden}, {ids.data(), DType::i32, s.n, s.k, s.k},
                      {weights.data(), DType::f32, s.n, s.k, s.k}, experts, scratch,
                      {out.data(), DType::f32, s.n, s.hidden, s.hidden});
  return out;
}

Step random_step(std::int64_t n, std::int64_t k, std::int64_t n_experts, std::int64_t hidden, std::int64_t inter,
                 std::mt19937& rng) {
  Step s{n, k, hidden, inter, {}, {}, {}};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  s.x.resize(std::size_t(n * hidden));
  for (auto& v : s.x) v = normal(rng);
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t j = 0; j < k; ++j) {
      s.ids.push_back(std::int32_t((t + j * 3) % n_experts));  // every expert used, distinct within a token
      s.weights.push_back(1.0f / float(k + j));
    }
  }
  return s;
}

struct Case {
  std::int64_t n_experts, hidden, inter, block_rows, block_cols;
};

class CpuFp8Experts : public testing::TestWithParam<Case> {};

TEST_P(CpuFp8Experts, EqualBf16ExpertsOfTheDecodedValues) {
  const Case c = GetParam();
  std::mt19937 rng(7);
  Fp8Stack gate_up(c.n_experts, 2 * c.inter, c.hidden, c.block_rows, c.block_cols, rng);
  Fp8Stack down(c.n_experts, c.hidden, c.inter, c.block_rows, c.block_cols, rng);
  MoeExperts fp8, bf16;
  fp8.gate_up = gate_up.fp8_tensor();
  fp8.gate_up_quant = gate_up.quant();
  fp8.down = down.fp8_tensor();
  fp8.down_quant = down.quant();
  bf16.gate_up = gate_up.bf16_tensor();
  bf16.down = down.bf16_tensor();
  const Step step = random_step(5, 2, c.n_experts, c.hidden, c.inter, rng);
  const std::vector<float> want = run(step, bf16);
  EXPECT_EQ(run(step, fp8), want);

  // Each block's scale is its own: doubling one scale of the last expert's down stack changes the
  // output of the tokens routed to it (and only the columns of that block's rows).
  down.scales.back() *= 2.0f;
  fp8.down_quant = down.quant();
  EXPECT_NE(run(step, fp8), want);
}

INSTANTIATE_TEST_SUITE_P(Blocks, CpuFp8Experts,
                         testing::Values(Case{3, 256, 128, 128, 128},  // Qwen3 FP8: whole 128 x 128 blocks
                                         Case{4, 160, 96, 128, 128},   // partial blocks at the edges
                                         Case{2, 64, 32, 16, 32},      // several blocks per matrix both ways
                                         Case{2, 64, 32, 1, 64}));     // a scale per row (channel scales)

TEST(CpuFp8ExpertsShapes, ScaleShapesAreChecked) {
  std::mt19937 rng(3);
  Fp8Stack gate_up(2, 64, 128, 128, 128, rng), down(2, 128, 32, 128, 128, rng);
  MoeExperts experts;
  experts.gate_up = gate_up.fp8_tensor();
  experts.gate_up_quant = gate_up.quant();
  experts.down = down.fp8_tensor();
  experts.down_quant = down.quant();
  const Step step = random_step(2, 2, 2, 128, 32, rng);
  EXPECT_NO_THROW(run(step, experts));
  experts.down_quant.block_cols = 16;  // the scales no longer cover the matrix's blocks
  EXPECT_THROW(run(step, experts), Error);
  experts.down_quant = down.quant();
  experts.down_quant.scales.dtype = DType::bf16;
  EXPECT_THROW(run(step, experts), Error);
}

}  // namespace
}  // namespace flare::helios
