// FP8 block-scaled experts (Qwen3 FP8 checkpoints) on the CUDA backend (moe_experts with E4M3
// stacks and F32 block scales) against the CPU backend (the reference, which decodes each value to
// bf16(e4m3 * scale), the weights the kernels decode too), on fresh random stacks (E4M3 bytes of
// moderate exponents, a random scale per block around the one that gives unit-scale outputs), random
// inputs, with the outputs and their row padding poisoned (NaN):
// - every kernel path (the fused decode GEMVs, the GEMVs over the align kernel's tiles, the
//   tensor-core GEMMs), each forced at every size on the Qwen3-30B-A3B shape (128 experts, hidden
//   2048, inter 768, top 8), and the default choice for 1..300 tokens;
// - 128 x 128 blocks, blocks that leave partial ones at the edges (columns that leave partial GEMM
//   tiles), 64 x 32 blocks and a scale per row; biases and the other activations through the FP8
//   epilogues;
// - steps where most experts get no token and one where one expert gets every token;
// - a captured router_topk + moe_experts replayed after the logits changed writes the eager bits.
// Prints max errors and, for information, the time of one Qwen3-30B-A3B-FP8 layer's experts.
// Skips without a GPU or NVRTC.
#ifdef FLARE_HAVE_CUDA

#include <cmath>
#include <cstring>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpu_support.h"
#include "helios/cpu/cpu_backend.h"
#include "moe_test_support.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

struct Options {
  std::int32_t block_rows = 128, block_cols = 128;
  bool biases = false;
  GatedActivation activation = GatedActivation::silu;
};

class CudaMoeFp8 : public MoeVersusCpuTest {
 protected:
  // E4M3 bytes of exponents 4..11 (values of magnitude 1/8 .. 30) with random signs and mantissas
  // (no NaN): the Qwen3-30B-A3B stacks hold 600 million values.
  std::vector<std::uint8_t> random_e4m3(std::size_t n) {
    std::vector<std::uint8_t> v = random_bytes(n);
    for (auto& b : v) b = std::uint8_t((b & 0x87) | ((4 + ((b >> 3) & 7)) << 3));
    return v;
  }

  // One stack [n_experts][rows, cols] on both backends: E4M3 values and F32 scales per block, each
  // scale 1 / (RMS of the values * sqrt(cols)) times 0.5 .. 2, so products have unit scale.
  void make_stack(MoeLayer& s, const Options& o, std::int64_t rows, std::int64_t cols, Tensor MoeExperts::*stack,
                  QuantizedWeight MoeExperts::*quant) {
    const std::int64_t e = s.n_experts;
    const std::vector<std::uint8_t> values = random_e4m3(std::size_t(e * rows * cols));
    double sum_sq = 0;
    for (std::size_t i = 0; i < std::min<std::size_t>(values.size(), 1 << 20); ++i) {
      const double v = f8_e4m3_to_f32(values[i]);
      sum_sq += v * v;
    }
    const double rms = std::sqrt(sum_sq / double(std::min<std::size_t>(values.size(), 1 << 20)));
    std::tie(s.cpu.*stack, s.gpu.*stack) = both(s, values.data(), values.size(), DType::f8_e4m3, e, rows, cols);
    const std::int64_t scale_rows = (rows + o.block_rows - 1) / o.block_rows;
    const std::int64_t scale_cols = (cols + o.block_cols - 1) / o.block_cols;
    const std::vector<float> jitter = random_f32(std::size_t(e * scale_rows * scale_cols), -1.0f, 1.0f);
    std::vector<float> scales(jitter.size());
    for (std::size_t i = 0; i < scales.size(); ++i) {
      scales[i] = float(std::exp2(jitter[i]) / (rms * std::sqrt(double(cols))));
    }
    const auto [cs, gs] = both(s, scales.data(), scales.size() * 4, DType::f32, e, scale_rows, scale_cols);
    for (auto [q, t] : {std::pair{&(s.cpu.*quant), cs}, std::pair{&(s.gpu.*quant), gs}}) {
      q->format = QuantizedWeight::Format::fp8_e4m3;
      q->scales = t;
      q->block_rows = o.block_rows;
      q->block_cols = o.block_cols;
    }
  }

  MoeLayer make_experts(std::int64_t n_experts, std::int64_t inter, std::int64_t hidden, const Options& o) {
    MoeLayer s;
    s.n_experts = n_experts;
    s.inter = inter;
    s.hidden = hidden;
    make_stack(s, o, 2 * inter, hidden, &MoeExperts::gate_up, &MoeExperts::gate_up_quant);
    make_stack(s, o, hidden, inter, &MoeExperts::down, &MoeExperts::down_quant);
    if (o.biases) add_biases(s);
    s.cpu.activation = s.gpu.activation = o.activation;
    return s;
  }

  // A step's input x [n, hidden] and the CPU's moe_experts of it under `r` (the reference every
  // path of the step is checked against: the CPU decodes the large stacks slowly).
  struct Reference {
    std::vector<std::uint16_t> x;
    std::vector<float> out;
  };
  Reference reference(const MoeLayer& s, const MoeRouting& r, std::int64_t n, std::int64_t k) {
    Reference ref;
    ref.x = random_bf16(std::size_t(n * s.hidden), 1.0f);
    ref.out = cpu_experts(s.cpu, s.hidden, s.inter, ref.x, r, n, k);
    return ref;
  }

  // The step on the default backend and on every forced path that takes it.
  void check_every_path(const MoeLayer& s, const MoeRouting& r, std::int64_t n, std::int64_t k,
                        const std::string& label) {
    const Reference ref = reference(s, r, n, k);
    check(s, r, n, k, ref.x, ref.out, label);
    if (n * k <= 32) check(s, r, n, k, ref.x, ref.out, label + " fused", fused_backend());
    check(s, r, n, k, ref.x, ref.out, label + " gemv", gemv_backend());
    check(s, r, n, k, ref.x, ref.out, label + " mma", mma_backend());
  }

  void run_cases(const MoeLayer& s, const MoeCases& cases, const std::string& what) {
    for (const auto& [n, k] : cases) {
      const MoeRouting r = cpu_routing(random_f32(std::size_t(n * s.n_experts), -4.0f, 4.0f), n, s.n_experts, k);
      check_every_path(s, r, n, k,
                       fmt::format("{} n {} k {} E {} inter {} hidden {}", what, n, k, s.n_experts, s.inter, s.hidden));
    }
  }
};

TEST_F(CudaMoeFp8, SmallShapesEveryPath) {
  run_cases(make_experts(4, 128, 256, {}), {{1, 1}, {3, 2}, {16, 4}, {64, 1}, {64, 4}, {300, 2}}, "fp8 128x128");
  // 96 and 160 columns: partial 128 x 128 blocks, and partial GEMM tiles (gate_up's second 64-column
  // block, down's 128-column block).
  run_cases(make_experts(16, 96, 160, {}), {{1, 4}, {7, 4}, {40, 4}, {300, 4}}, "fp8 partial blocks");
}

TEST_F(CudaMoeFp8, OtherBlockShapesBiasesAndActivations) {
  run_cases(make_experts(8, 128, 256, {.block_rows = 64, .block_cols = 32}), {{1, 2}, {16, 2}, {300, 2}},
            "fp8 64x32 blocks");
  // A scale per row (channel scales: blocks spanning the row).
  run_cases(make_experts(8, 128, 256, {.block_rows = 1, .block_cols = 256}), {{1, 2}, {16, 2}, {300, 2}},
            "fp8 row scales");
  run_cases(make_experts(8, 128, 256, {.biases = true, .activation = GatedActivation::gelu_tanh}),
            {{3, 2}, {300, 2}}, "fp8 gelu bias");
  run_cases(make_experts(8, 128, 256, {.biases = true, .activation = GatedActivation::clamped_silu}),
            {{1, 2}, {300, 2}}, "fp8 clamped bias");
}

TEST_F(CudaMoeFp8, Qwen3_30bA3bShape) {
  const MoeLayer s = make_experts(128, 768, 2048, {});
  run_cases(s, {{1, 8}, {4, 8}, {8, 8}, {100, 8}}, "qwen3-30b-a3b-fp8");

  // For information: the time of each path on one layer's experts.
  const std::vector<std::pair<const char*, cuda::CudaBackend*>> paths = {
      {"default", gpu_.get()}, {"fused", fused_backend()}, {"gemv", gemv_backend()}, {"mma", mma_backend()}};
  for (const std::int64_t n : {1, 4, 8, 32, 128, 512}) {
    const std::int32_t k = 8;
    const MoeRouting r = cpu_routing(random_f32(std::size_t(n * 128), -4.0f, 4.0f), n, 128, k);
    const std::set<std::int32_t> distinct(r.ids.begin(), r.ids.end());
    // FP8: a byte a value and an F32 scale per 128 x 128 block.
    const double bytes = double(distinct.size()) * (3.0 * 2048 * 768) * (1.0 + 4.0 / (128 * 128));
    for (const auto& [name, gpu] : paths) {
      if (gpu == fused_backend() && n * k > 32) continue;
      gpu_->synchronize();
      const Matrix gx = device_bf16(*gpu, random_bf16(std::size_t(n * 2048), 1.0f), n, 2048, 2048);
      const Matrix gu = device_bf16(*gpu, {}, n * k, 2 * 768, 2 * 768), act = device_bf16(*gpu, {}, n * k, 768, 768),
                   eo = device_bf16(*gpu, {}, n * k, 2048, 2048), out = device_bf16(*gpu, {}, n, 2048, 2048);
      const float ms = stream_time_ms(
          *gpu, [&] { gpu->moe_experts(gx.t, r.gpu_ids.t, r.gpu_weights.t, s.gpu, {gu.t, act.t, eo.t}, out.t); }, 20);
      std::printf("[ timing   ] qwen3-30b-a3b-fp8 experts %-7s n=%3lld: %8.1f us, %3zu experts, %.0f GB/s of their weights\n",
                  name, static_cast<long long>(n), ms * 1e3, distinct.size(), bytes / (ms * 1e-3) / 1e9);
    }
  }
}

TEST_F(CudaMoeFp8, OneExpertGetsEveryTokenAndMostGetNone) {
  const MoeLayer s = make_experts(32, 256, 512, {});
  for (const auto& [n, k] : std::vector<std::pair<std::int64_t, std::int32_t>>{{1, 1}, {16, 2}, {64, 3}, {300, 3}}) {
    std::vector<float> logits = random_f32(std::size_t(n * 32), -1.0f, 1.0f);
    for (std::int64_t t = 0; t < n; ++t) {
      // Slot 0 is expert 9 for every token; slots 1 and 2 are experts 20 and 21 (k <= 3).
      logits[std::size_t(t * 32 + 9)] += 30.0f;
      logits[std::size_t(t * 32 + (t % 2 ? 20 : 21))] += 10.0f;
      logits[std::size_t(t * 32 + (t % 2 ? 21 : 20))] += 9.0f;
    }
    const MoeRouting r = cpu_routing(logits, n, 32, k);
    const std::set<std::int32_t> distinct(r.ids.begin(), r.ids.end());
    for (std::int64_t t = 0; t < n; ++t) ASSERT_EQ(r.ids[std::size_t(t * k)], 9);
    ASSERT_LE(distinct.size(), 3u);
    check_every_path(s, r, n, k, fmt::format("one expert for all, {} of 32 used, n {} k {}", distinct.size(), n, k));
  }
}

TEST_F(CudaMoeFp8, CapturedStepReplaysOtherRoutings) {
  const MoeLayer s = make_experts(16, 768, 2048, {});
  for (cuda::CudaBackend* gpu : {gpu_.get(), fused_backend(), mma_backend()}) {
    ASSERT_NE(gpu, nullptr);
    const char* path = gpu == gpu_.get() ? "default" : gpu == fused_backend() ? "fused" : "mma";
    for (const auto& [n, k] : std::vector<std::pair<std::int64_t, std::int32_t>>{{3, 4}, {16, 2}, {64, 4}, {300, 2}}) {
      if (gpu == fused_backend() && n * k > 32) continue;
      const std::string label = fmt::format("graph {} n {} k {}", path, n, k);
      const auto x = random_bf16(std::size_t(n * 2048), 1.0f);
      gpu_->synchronize();
      const Matrix gx = device_bf16(*gpu, x, n, 2048, 2048);
      const Matrix logits = device_f32(*gpu, random_f32(std::size_t(n * 16), -4.0f, 4.0f), n, 16);
      std::vector<std::int32_t> poison(std::size_t(n * k), 0x7fc00001);
      const Matrix ids{gpu->allocate(poison.size() * 4), {}}, weights = device_f32(*gpu, {}, n, k);
      gpu->upload(*ids.buffer, 0, poison.data(), poison.size() * 4);
      const Matrix gu = device_bf16(*gpu, {}, n * k, 2 * 768, 2 * 768), act = device_bf16(*gpu, {}, n * k, 768, 768),
                   eo = device_bf16(*gpu, {}, n * k, 2048, 2048), out = device_bf16(*gpu, {}, n, 2048, 2048);
      const Tensor ids_t{ids.buffer->data(), DType::i32, n, k, k};
      const auto step = [&] {
        gpu->router_topk(logits.t, {k, true}, ids_t, weights.t);
        gpu->moe_experts(gx.t, ids_t, weights.t, s.gpu, {gu.t, act.t, eo.t}, out.t);
      };
      step();  // sizes the workspace outside the capture
      gpu->synchronize();
      const std::uint64_t generation = gpu->graph_generation();
      const auto graph = gpu->capture(step);
      ASSERT_NE(graph, nullptr);
      for (int round = 0; round < 3; ++round) {
        const std::vector<float> new_logits = random_f32(std::size_t(n * 16), -4.0f, 4.0f);
        gpu->upload(*logits.buffer, 0, new_logits.data(), new_logits.size() * 4);
        gpu->replay(*graph);
        gpu->synchronize();
        const std::vector<float> replayed = device_values(*gpu, out);
        step();
        gpu->synchronize();
        EXPECT_EQ(device_values(*gpu, out), replayed) << label << " round " << round << ": replay != eager";
        // The replayed output against the CPU under the same routing.
        const MoeRouting r = cpu_routing(new_logits, n, 16, k);
        expect_experts_close(fmt::format("{} round {}", label, round), replayed,
                             cpu_experts(s.cpu, s.hidden, s.inter, x, r, n, k));
      }
      EXPECT_EQ(gpu->graph_generation(), generation) << label << ": the workspace moved";
    }
  }
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
