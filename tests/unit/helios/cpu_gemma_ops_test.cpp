// The CPU backend's operations for Gemma against naive double-precision formulas on random input:
// geglu (gelu_tanh(gate) * up, with PyTorch's gelu(approximate="tanh") values at a few points),
// the final logits' soft cap and the embedding scale, on strided views whose padding must stay
// untouched; and the shape and dtype checks of each.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/error.h"
#include "helios/cpu/cpu_backend.h"

namespace flare::helios {
namespace {

constexpr float k_pad = -12345.0f;  // row padding: no operation may write it

double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// A rows x cols f32 view with `pad` extra elements per row, holding normal(0, scale) values.
struct Strided {
  std::vector<float> data;
  Tensor t;
  Strided(std::int64_t rows, std::int64_t cols, std::int64_t pad, float scale, std::mt19937& rng)
      : data(std::size_t(rows * (cols + pad)), k_pad) {
    std::normal_distribution<float> normal(0.0f, scale);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) data[std::size_t(r * (cols + pad) + c)] = normal(rng);
    }
    t = Tensor{data.data(), DType::f32, rows, cols, cols + pad};
  }
  float at(std::int64_t r, std::int64_t c) const { return data[std::size_t(r * t.stride + c)]; }
  bool padding_intact() const {
    for (std::int64_t r = 0; r < t.rows; ++r) {
      for (std::int64_t c = t.cols; c < t.stride; ++c) {
        if (data[std::size_t(r * t.stride + c)] != k_pad) return false;
      }
    }
    return true;
  }
};

TEST(CpuGemmaOps, GegluMatchesTheTanhApproximationOfGelu) {
  std::mt19937 rng(11);
  cpu::CpuBackend backend(2);
  for (const auto& [rows, inter] : std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {3, 17}, {9, 640}}) {
    Strided gate_up(rows, 2 * inter, 3, 3.0f, rng), out(rows, inter, 5, 1.0f, rng);
    backend.geglu(gate_up.t, out.t);
    double worst = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < inter; ++c) {
        const double ref = gelu_tanh_ref(gate_up.at(r, c)) * gate_up.at(r, inter + c);
        // Relative to 1 + |ref|: for very negative gates 1 + tanh(...) cancels in F32, as in PyTorch.
        worst = std::max(worst, std::fabs(out.at(r, c) - ref) / (1.0 + std::fabs(ref)));
      }
    }
    EXPECT_LT(worst, 1e-5) << rows << " x " << inter;
    EXPECT_TRUE(out.padding_intact()) << rows << " x " << inter;
  }
  // PyTorch: torch.nn.functional.gelu(x, approximate="tanh") at these points (up = 1).
  const std::vector<std::pair<float, float>> points = {
      {0.0f, 0.0f}, {1.0f, 0.84119199f}, {-1.0f, -0.15880801f}, {2.0f, 1.95459769f}, {-3.0f, -0.00363739f},
      {0.5f, 0.34571401f}, {10.0f, 10.0f}, {-10.0f, 0.0f}};
  std::vector<float> gate_up, out(points.size(), k_pad);
  for (const auto& p : points) gate_up.push_back(p.first);
  gate_up.insert(gate_up.end(), points.size(), 1.0f);
  const auto n = std::int64_t(points.size());
  backend.geglu(Tensor{gate_up.data(), DType::f32, 1, 2 * n, 2 * n}, Tensor{out.data(), DType::f32, 1, n, n});
  for (std::size_t i = 0; i < points.size(); ++i) EXPECT_NEAR(out[i], points[i].second, 1e-6) << points[i].first;
}

TEST(CpuGemmaOps, SoftCapIsCapTimesTanhOfXOverCap) {
  std::mt19937 rng(12);
  cpu::CpuBackend backend(2);
  for (const float cap : {30.0f, 1.0f}) {
    Strided x(7, 1001, 2, 40.0f, rng);
    const Strided before = x;
    backend.soft_cap(x.t, cap);
    double worst = 0;
    for (std::int64_t r = 0; r < x.t.rows; ++r) {
      for (std::int64_t c = 0; c < x.t.cols; ++c) {
        const double ref = cap * std::tanh(double(before.at(r, c)) / cap);
        worst = std::max(worst, std::fabs(x.at(r, c) - ref));
        EXPECT_LE(std::fabs(x.at(r, c)), cap);
      }
    }
    EXPECT_LT(worst, 4e-6 * cap) << "cap " << cap;
    EXPECT_TRUE(x.padding_intact());
  }
  std::vector<float> edge = {0.0f, 1e-3f, -1e-3f, 1e4f, -1e4f, INFINITY, -INFINITY};
  backend.soft_cap(Tensor{edge.data(), DType::f32, 1, 7, 7}, 30.0f);
  EXPECT_EQ(edge[0], 0.0f);
  EXPECT_NEAR(edge[1], 1e-3f, 1e-9f) << "identity near 0";
  EXPECT_NEAR(edge[2], -1e-3f, 1e-9f);
  EXPECT_EQ(edge[3], 30.0f);
  EXPECT_EQ(edge[4], -30.0f);
  EXPECT_EQ(edge[5], 30.0f) << "infinite logits are capped too";
  EXPECT_EQ(edge[6], -30.0f);
}

TEST(CpuGemmaOps, ScaleMultipliesInPlace) {
  std::mt19937 rng(13);
  cpu::CpuBackend backend(2);
  const float factor = std::sqrt(2304.0f);  // Gemma-3-2B's sqrt(hidden)
  Strided x(5, 2304, 4, 1.0f, rng);
  const Strided before = x;
  backend.scale(x.t, factor);
  for (std::int64_t r = 0; r < x.t.rows; ++r) {
    for (std::int64_t c = 0; c < x.t.cols; ++c) ASSERT_EQ(x.at(r, c), before.at(r, c) * factor) << r << ", " << c;
  }
  EXPECT_TRUE(x.padding_intact());
}

TEST(CpuGemmaOps, ShapeAndDtypeMismatchesAreInternalErrors) {
  cpu::CpuBackend backend(1);
  std::vector<float> a(64, 1.0f), b(64, 1.0f);
  EXPECT_THROW(backend.geglu(Tensor{a.data(), DType::f32, 2, 16, 16}, Tensor{b.data(), DType::f32, 2, 16, 16}), Error);
  EXPECT_THROW(backend.geglu(Tensor{a.data(), DType::f32, 2, 16, 16}, Tensor{b.data(), DType::f32, 1, 8, 8}), Error);
  EXPECT_THROW(backend.soft_cap(Tensor{a.data(), DType::bf16, 2, 16, 16}, 30.0f), Error);
  EXPECT_THROW(backend.soft_cap(Tensor{a.data(), DType::f32, 2, 16, 16}, 0.0f), Error);
  EXPECT_THROW(backend.scale(Tensor{a.data(), DType::bf16, 2, 16, 16}, 2.0f), Error);
}

}  // namespace
}  // namespace flare::helios
