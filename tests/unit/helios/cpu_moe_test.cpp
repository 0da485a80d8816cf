// The CPU backend's mixture of experts against naive double-precision formulas on random input:
// router_topk (softmax, top-k in descending order, ties to the lower index, renormalization or not)
// and moe_experts (each (token, slot) pair through its expert, weighted sum), including a step where
// every token picks the same expert and experts that get no token; and their shape checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "helios/cpu/cpu_backend.h"

namespace flare::helios {
namespace {

std::uint16_t to_bf16(float v) {  // round to nearest even
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  return std::uint16_t(bits >> 16);
}

float from_bf16(std::uint16_t h) {
  const std::uint32_t bits = std::uint32_t(h) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

Tensor view(void* data, DType dtype, std::int64_t rows, std::int64_t cols) {
  return Tensor{data, dtype, rows, cols, cols};
}

struct Experts {
  std::int64_t n_experts, hidden, inter;
  std::vector<std::uint16_t> gate_up, down;  // [E][2I, H], [E][H, I] bf16
  Experts(std::int64_t e, std::int64_t h, std::int64_t i, std::mt19937& rng)
      : n_experts(e), hidden(h), inter(i), gate_up(std::size_t(e * 2 * i * h)), down(std::size_t(e * h * i)) {
    std::normal_distribution<float> normal(0.0f, 0.2f);
    for (auto& v : gate_up) v = to_bf16(normal(rng));
    for (auto& v : down) v = to_bf16(normal(rng));
  }
  MoeExperts stacks(GatedActivation activation) {
    MoeExperts m;
    m.gate_up = Tensor{gate_up.data(), DType::bf16, 2 * inter, hidden, hidden, n_experts, 2 * inter * hidden};
    m.down = Tensor{down.data(), DType::bf16, hidden, inter, inter, n_experts, hidden * inter};
    m.activation = activation;
    return m;
  }
  // One pair's expert output in double precision.
  std::vector<double> run(std::int64_t e, const float* x, GatedActivation activation) const {
    std::vector<double> act(static_cast<std::size_t>(inter)), out(static_cast<std::size_t>(hidden), 0.0);
    for (std::int64_t c = 0; c < inter; ++c) {
      double g = 0, u = 0;
      for (std::int64_t k = 0; k < hidden; ++k) {
        g += double(from_bf16(gate_up[std::size_t((e * 2 * inter + c) * hidden + k)])) * x[k];
        u += double(from_bf16(gate_up[std::size_t((e * 2 * inter + inter + c) * hidden + k)])) * x[k];
      }
      const double a = activation == GatedActivation::silu
                           ? g / (1.0 + std::exp(-g))
                           : 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
      act[std::size_t(c)] = a * u;
    }
    for (std::int64_t r = 0; r < hidden; ++r) {
      for (std::int64_t c = 0; c < inter; ++c) {
        out[std::size_t(r)] += double(from_bf16(down[std::size_t((e * hidden + r) * inter + c)])) * act[std::size_t(c)];
      }
    }
    return out;
  }
};

TEST(CpuMoe, RouterTakesTheMostProbableExpertsInOrder) {
  cpu::CpuBackend backend(2);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const std::int64_t n = 5, e = 16, k = 4;
  std::vector<float> logits(std::size_t(n * e));
  for (auto& v : logits) v = normal(rng);
  for (const bool renormalize : {true, false}) {
    std::vector<std::int32_t> ids(std::size_t(n * k), -1);
    std::vector<float> weights(std::size_t(n * k), NAN);
    backend.router_topk(view(logits.data(), DType::f32, n, e), {std::int32_t(k), renormalize},
                        view(ids.data(), DType::i32, n, k), view(weights.data(), DType::f32, n, k));
    for (std::int64_t t = 0; t < n; ++t) {
      const float* l = &logits[std::size_t(t * e)];
      double sum = 0;
      for (std::int64_t x = 0; x < e; ++x) sum += std::exp(double(l[x]));
      std::vector<std::int32_t> order(static_cast<std::size_t>(e));
      for (std::int32_t x = 0; x < e; ++x) order[std::size_t(x)] = x;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
      double chosen = 0;
      for (std::int64_t j = 0; j < k; ++j) chosen += std::exp(double(l[order[std::size_t(j)]])) / sum;
      for (std::int64_t j = 0; j < k; ++j) {
        EXPECT_EQ(ids[std::size_t(t * k + j)], order[std::size_t(j)]) << t << " " << j;
        const double p = std::exp(double(l[order[std::size_t(j)]])) / sum;
        EXPECT_NEAR(weights[std::size_t(t * k + j)], renormalize ? p / chosen : p, 1e-6);
      }
    }
  }
}

TEST(CpuMoe, RouterTiesGoToTheLowerIndex) {
  cpu::CpuBackend backend(1);
  std::vector<float> logits = {0.5f, 2.0f, 1.0f, 2.0f, 1.0f, 2.0f};
  std::vector<std::int32_t> ids(3);
  std::vector<float> weights(3);
  backend.router_topk(view(logits.data(), DType::f32, 1, 6), {3, true}, view(ids.data(), DType::i32, 1, 3),
                      view(weights.data(), DType::f32, 1, 3));
  EXPECT_EQ(ids, (std::vector<std::int32_t>{1, 3, 5}));
  for (float w : weights) EXPECT_NEAR(w, 1.0f / 3.0f, 1e-7);
  backend.router_topk(view(logits.data(), DType::f32, 1, 6), {1, true}, view(ids.data(), DType::i32, 1, 1),
                      view(weights.data(), DType::f32, 1, 1));
  EXPECT_EQ(ids[0], 1);
  EXPECT_FLOAT_EQ(weights[0], 1.0f);
}

struct Case {
  std::int64_t n, n_experts, k, hidden, inter;
  bool one_expert;  // every token picks expert n_experts - 1 (with the others after it)
  GatedActivation activation;
};

class CpuMoeExperts : public ::testing::TestWithParam<Case> {};

TEST_P(CpuMoeExperts, MatchesEachPairThroughItsExpert) {
  const Case c = GetParam();
  cpu::CpuBackend backend(2);
  std::mt19937 rng(std::uint32_t(c.n * 131 + c.n_experts));
  Experts experts(c.n_experts, c.hidden, c.inter, rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<std::int32_t> pick(0, std::int32_t(c.n_experts) - 1);
  std::vector<float> x(std::size_t(c.n * c.hidden)), weights(std::size_t(c.n * c.k));
  std::vector<std::int32_t> ids(std::size_t(c.n * c.k));
  for (auto& v : x) v = normal(rng);
  for (std::int64_t t = 0; t < c.n; ++t) {
    std::vector<std::int32_t> chosen;
    while (std::int64_t(chosen.size()) < c.k) {
      const std::int32_t e = c.one_expert ? std::int32_t(c.n_experts - 1 - std::int64_t(chosen.size())) : pick(rng);
      if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
    }
    for (std::int64_t j = 0; j < c.k; ++j) {
      ids[std::size_t(t * c.k + j)] = chosen[std::size_t(j)];
      weights[std::size_t(t * c.k + j)] = std::uniform_real_distribution<float>(0.05f, 1.0f)(rng);
    }
  }
  const std::int64_t pairs = c.n * c.k;
  std::vector<float> gate_up(std::size_t(pairs * 2 * c.inter), NAN), act(std::size_t(pairs * c.inter), NAN),
      expert_out(std::size_t(pairs * c.hidden), NAN), out(std::size_t(c.n * c.hidden), NAN);
  const MoeScratch scratch{view(gate_up.data(), DType::f32, pairs, 2 * c.inter),
                           view(act.data(), DType::f32, pairs, c.inter),
                           view(expert_out.data(), DType::f32, pairs, c.hidden)};
  backend.moe_experts(view(x.data(), DType::f32, c.n, c.hidden), view(ids.data(), DType::i32, c.n, c.k),
                      view(weights.data(), DType::f32, c.n, c.k), experts.stacks(c.activation), scratch,
                      view(out.data(), DType::f32, c.n, c.hidden));
  double worst = 0;
  for (std::int64_t t = 0; t < c.n; ++t) {
    std::vector<double> ref(static_cast<std::size_t>(c.hidden), 0.0);
    for (std::int64_t j = 0; j < c.k; ++j) {
      const auto y = experts.run(ids[std::size_t(t * c.k + j)], &x[std::size_t(t * c.hidden)], c.activation);
      for (std::int64_t r = 0; r < c.hidden; ++r) ref[std::size_t(r)] += weights[std::size_t(t * c.k + j)] * y[std::size_t(r)];
    }
    for (std::int64_t r = 0; r < c.hidden; ++r) {
      const double got = out[std::size_t(t * c.hidden + r)];
      ASSERT_TRUE(std::isfinite(got)) << t << " " << r;
      worst = std::max(worst, std::fabs(got - ref[std::size_t(r)]) / (1.0 + std::fabs(ref[std::size_t(r)])));
    }
  }
  EXPECT_LT(worst, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuMoeExperts,
                         ::testing::Values(Case{1, 8, 2, 64, 32, false, GatedActivation::silu},
                                           Case{7, 16, 4, 48, 24, false, GatedActivation::silu},
                                           Case{33, 4, 1, 32, 40, false, GatedActivation::gelu_tanh},
                                           Case{12, 8, 3, 32, 16, true, GatedActivation::silu},
                                           Case{3, 128, 8, 64, 16, false, GatedActivation::silu}));

TEST(CpuMoe, ShapesAreChecked) {
  cpu::CpuBackend backend(1);
  std::mt19937 rng(1);
  Experts experts(4, 8, 4, rng);
  std::vector<float> x(16), out(16), buf(64), weights(4);
  std::vector<std::int32_t> ids = {0, 9, 1, 2};  // 9: no such expert
  const MoeScratch scratch{view(buf.data(), DType::f32, 4, 8), view(buf.data(), DType::f32, 4, 4),
                           view(buf.data(), DType::f32, 4, 8)};
  EXPECT_THROW(backend.moe_experts(view(x.data(), DType::f32, 2, 8), view(ids.data(), DType::i32, 2, 2),
                                   view(weights.data(), DType::f32, 2, 2), experts.stacks(GatedActivation::silu),
                                   scratch, view(out.data(), DType::f32, 2, 8)),
               Error);
  std::vector<float> logits(8);
  EXPECT_THROW(backend.router_topk(view(logits.data(), DType::f32, 2, 4), {5, true},
                                   view(ids.data(), DType::i32, 2, 5), view(weights.data(), DType::f32, 2, 5)),
               Error);
}

}  // namespace
}  // namespace flare::helios
