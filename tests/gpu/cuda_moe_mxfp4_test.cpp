// gpt-oss's experts on the CUDA backend (moe_experts with MXFP4 stacks, expert biases and the
// clamped SwiGLU) against the CPU backend (the reference, which decodes MXFP4 exactly to BF16), on
// fresh random stacks (random value bytes; E8M0 scales around the one that gives unit-scale
// outputs), random biases and inputs, with the outputs and their row padding poisoned (NaN):
// - both kernel paths (the decoding GEMVs up to max(64, 2 E) pairs, the decoding tensor-core GEMMs
//   above, each forced at every size on the gpt-oss-20b shape: 32 experts, hidden and inter 2880,
//   top 4);
// - a clamp limit low enough that the clamps bind (and gpt-oss's 7), shapes whose columns leave
//   partial GEMM tiles, stacks without biases, BF16 stacks with biases and the clamped SwiGLU;
// - steps where most experts get no token and one where one expert gets every token.
// Prints max errors and, for information, the time of one gpt-oss-20b layer's experts.
// Skips without a GPU or NVRTC.
#ifdef FLARE_HAVE_CUDA

#include <cmath>
#include <cstring>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpu_support.h"
#include "helios/cpu/cpu_backend.h"
#include "helios/mxfp4.h"
#include "moe_test_support.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

struct Options {
  bool mxfp4 = true;
  bool biases = true;
  GatedActivation activation = GatedActivation::clamped_silu;
  float limit = 7.0f;
};

class CudaMoeMxfp4 : public MoeVersusCpuTest {
 protected:
  // E8M0 scales for [n_experts][rows, cols / 32]: e0 - 1, e0 or e0 + 1, e0 chosen so that a row of
  // random E2M1 values (RMS 2.93) times the scale has unit-scale products with unit-scale inputs.
  std::vector<std::uint8_t> random_scales(std::size_t n, std::int64_t fan_in) {
    const int e0 = 127 + int(std::lround(std::log2(1.0 / (2.93 * std::sqrt(double(fan_in))))));
    std::uniform_int_distribution<int> jitter(-1, 1);
    std::vector<std::uint8_t> v(n);
    for (auto& e : v) e = std::uint8_t(e0 + jitter(rng_));
    return v;
  }

  // One stack [n_experts][rows, cols] on both backends: MXFP4 values and scales, or BF16.
  void make_stack(MoeLayer& s, bool mxfp4, std::int64_t rows, std::int64_t cols, Tensor MoeExperts::*stack,
                  QuantizedWeight MoeExperts::*quant) {
    const std::int64_t e = s.n_experts;
    if (!mxfp4) {
      const auto values = random_bf16(std::size_t(e * rows * cols), 1.0f / std::sqrt(float(cols)));
      std::tie(s.cpu.*stack, s.gpu.*stack) = both(s, values.data(), values.size() * 2, DType::bf16, e, rows, cols);
      return;
    }
    const std::vector<std::uint8_t> values = random_bytes(std::size_t(e * rows * cols / 2));
    std::tie(s.cpu.*stack, s.gpu.*stack) = both(s, values.data(), values.size(), DType::u8, e, rows, cols / 2);
    const std::vector<std::uint8_t> scales = random_scales(std::size_t(e * rows * cols / 32), cols);
    const auto [cs, gs] = both(s, scales.data(), scales.size(), DType::u8, e, rows, cols / 32);
    for (auto [q, t] : {std::pair{&(s.cpu.*quant), cs}, std::pair{&(s.gpu.*quant), gs}}) {
      q->format = QuantizedWeight::Format::mxfp4;
      q->scales = t;
      q->block_rows = 1;
      q->block_cols = k_mxfp4_block;
    }
  }

  MoeLayer make_experts(std::int64_t n_experts, std::int64_t inter, std::int64_t hidden, const Options& o) {
    MoeLayer s;
    s.n_experts = n_experts;
    s.inter = inter;
    s.hidden = hidden;
    make_stack(s, o.mxfp4, 2 * inter, hidden, &MoeExperts::gate_up, &MoeExperts::gate_up_quant);
    make_stack(s, o.mxfp4, hidden, inter, &MoeExperts::down, &MoeExperts::down_quant);
    if (o.biases) add_biases(s);
    for (MoeExperts* m : {&s.cpu, &s.gpu}) {
      m->activation = o.activation;
      m->clamp_limit = o.limit;
      m->clamp_alpha = 1.702f;
    }
    return s;
  }

  // moe_experts of random x [n, hidden] under `r` on `on` (default gpu_) against the CPU's.
  void check_random(const MoeLayer& s, const MoeRouting& r, std::int64_t n, std::int64_t k, const std::string& label,
                    cuda::CudaBackend* on = nullptr) {
    const auto x = random_bf16(std::size_t(n * s.hidden), 1.0f);
    check(s, r, n, k, x, cpu_experts(s.cpu, s.hidden, s.inter, x, r, n, k), label, on);
  }

  // Each case on the default backend and, for steps of up to 32 pairs, through the fused kernels.
  void run_cases(const MoeLayer& s, const MoeCases& cases, const std::string& what) {
    for (const auto& [n, k] : cases) {
      const MoeRouting r = cpu_routing(random_f32(std::size_t(n * s.n_experts), -4.0f, 4.0f), n, s.n_experts, k);
      const std::string label = fmt::format("{} n {} k {} E {} inter {} hidden {}", what, n, k, s.n_experts, s.inter, s.hidden);
      check_random(s, r, n, k, label);
      if (n * k <= 32 && fused_backend()) check_random(s, r, n, k, label + " fused", fused_backend());
    }
  }
};

TEST_F(CudaMoeMxfp4, SmallShapesBothPaths) {
  // A limit of 0.5 binds for most gate and up values; pairs <= 64 take the GEMVs, more the GEMMs.
  const MoeLayer s = make_experts(4, 64, 64, {.limit = 0.5f});
  run_cases(s, {{1, 1}, {3, 2}, {16, 4}, {64, 1}, {64, 4}, {300, 2}}, "mxfp4 clamp 0.5");
  // 96 columns: the GEMM's second 64-column block (gate_up) and its 128-column block (down) are partial.
  const MoeLayer p = make_experts(16, 96, 160, {.limit = 1.0f});
  run_cases(p, {{1, 4}, {7, 4}, {40, 4}, {300, 4}}, "mxfp4 clamp 1");
}

TEST_F(CudaMoeMxfp4, WithoutBiasesAndOtherActivations) {
  run_cases(make_experts(8, 128, 256, {.biases = false, .activation = GatedActivation::silu}),
            {{1, 2}, {16, 2}, {300, 2}}, "mxfp4 silu no bias");
  run_cases(make_experts(8, 128, 256, {.activation = GatedActivation::gelu_tanh}), {{3, 2}, {300, 2}},
            "mxfp4 gelu bias");
  // BF16 stacks through the same epilogues (biases, the clamped SwiGLU).
  run_cases(make_experts(8, 128, 256, {.mxfp4 = false, .limit = 1.0f}), {{1, 2}, {16, 2}, {300, 2}},
            "bf16 clamp 1 bias");
}

TEST_F(CudaMoeMxfp4, GptOss20bShape) {
  const MoeLayer s = make_experts(32, 2880, 2880, {});
  run_cases(s, {{1, 4}, {8, 4}, {100, 4}}, "gpt-oss-20b");

  // Each path forced at every size, then (informational) the time of each on one layer's experts.
  std::string reason;
  const auto mma = try_cuda_backend(&reason, {.moe_gemv_max_pairs = 0});
  const auto gemv = try_cuda_backend(&reason, {.moe_gemv_max_pairs = 1 << 30});
  const auto unfused = try_cuda_backend(&reason, {.moe_fused_max_pairs = 0});  // the GEMVs with align and combine
  ASSERT_TRUE(mma && gemv && unfused) << reason;
  for (const std::int64_t n : {1, 8, 100}) {
    const MoeRouting r = cpu_routing(random_f32(std::size_t(n * 32), -4.0f, 4.0f), n, 32, 4);
    check_random(s, r, n, 4, fmt::format("gpt-oss-20b n {} forced mma", n), mma.get());
    check_random(s, r, n, 4, fmt::format("gpt-oss-20b n {} forced gemv", n), gemv.get());
    check_random(s, r, n, 4, fmt::format("gpt-oss-20b n {} unfused gemv", n), unfused.get());
  }
  const std::vector<std::pair<const char*, cuda::CudaBackend*>> paths = {
      {"default", gpu_.get()}, {"mma", mma.get()}, {"gemv", gemv.get()}, {"unfused", unfused.get()}};
  for (const std::int64_t n : {1, 8, 32, 128, 512}) {
    const std::int32_t k = 4;
    const MoeRouting r = cpu_routing(random_f32(std::size_t(n * 32), -4.0f, 4.0f), n, 32, k);
    const std::set<std::int32_t> distinct(r.ids.begin(), r.ids.end());
    // MXFP4: half a byte a value and a scale byte per 32.
    const double bytes = double(distinct.size()) * (3.0 * 2880 * 2880) * (0.5 + 1.0 / 32);
    for (const auto& [name, gpu] : paths) {
      gpu_->synchronize();
      const Matrix gx = device_bf16(*gpu, random_bf16(std::size_t(n * 2880), 1.0f), n, 2880, 2880);
      const Matrix gu = device_bf16(*gpu, {}, n * k, 2 * 2880, 2 * 2880), act = device_bf16(*gpu, {}, n * k, 2880, 2880),
                   eo = device_bf16(*gpu, {}, n * k, 2880, 2880), out = device_bf16(*gpu, {}, n, 2880, 2880);
      const float ms = stream_time_ms(
          *gpu, [&] { gpu->moe_experts(gx.t, r.gpu_ids.t, r.gpu_weights.t, s.gpu, {gu.t, act.t, eo.t}, out.t); }, 20);
      std::printf("[ timing   ] gpt-oss-20b experts %-7s n=%3lld: %8.1f us, %2zu experts, %.0f GB/s of their weights\n",
                  name, static_cast<long long>(n), ms * 1e3, distinct.size(), bytes / (ms * 1e-3) / 1e9);
    }
  }
}

TEST_F(CudaMoeMxfp4, OneExpertGetsEveryTokenAndMostGetNone) {
  const MoeLayer s = make_experts(32, 256, 512, {.limit = 2.0f});
  for (const auto& [n, k] : std::vector<std::pair<std::int64_t, std::int32_t>>{{1, 1}, {16, 2}, {64, 3}, {300, 3}}) {
    std::vector<float> logits = random_f32(std::size_t(n * 32), -1.0f, 1.0f);
    for (std::int64_t t = 0; t < n; ++t) {
      // Slot 0 is expert 9 for every token; slots 1 and 2 are experts 20 and 21 (k <= 3).
      logits[std::size_t(t * 32 + 9)] += 30.0f;
      logits[std::size_t(t * 32 + (t % 2 ? 20 : 21))] += 10.0f;
      logits[std::size_t(t * 32 + (t % 2 ? 21 : 20))] += 9.0f;
    }
    const MoeRouting r = cpu_routing(logits, n, 32, k);
    std::set<std::int32_t> distinct(r.ids.begin(), r.ids.end());
    for (std::int64_t t = 0; t < n; ++t) ASSERT_EQ(r.ids[std::size_t(t * k)], 9);
    ASSERT_LE(distinct.size(), 3u);
    const std::string label = fmt::format("one expert for all, {} of 32 used, n {} k {}", distinct.size(), n, k);
    check_random(s, r, n, k, label);
    if (n * k <= 32 && fused_backend()) check_random(s, r, n, k, label + " fused", fused_backend());
  }
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
