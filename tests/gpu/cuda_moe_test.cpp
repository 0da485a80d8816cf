// The CUDA backend's mixture-of-experts operations (router_topk, moe_experts) against the CPU
// backend (the reference), through the Backend interface, on fresh random inputs with poisoned
// outputs and row padding:
// - router_topk for 4..128 experts, top 1..8, with and without renormalization: the same ids, and
//   weights within F32 rounding; ties (equal logits) go to the lower index;
// - moe_experts for 1..300 tokens, top 1..8, 4..128 experts, inter 64 and 768, hidden 64 and 2048,
//   SwiGLU and GeGLU, on both kernel paths (the GEMVs up to max(64, 2 E) pairs, the tensor-core
//   GEMMs above; each forced at every size on the Qwen3-30B-A3B shape); a step where every token
//   picks the same experts, and one where two experts of 128 get every token; within BF16
//   tolerances of the CPU's F32 products;
// - a captured router_topk + moe_experts replayed after the logits changed (another routing, the
//   same shapes) writes the eager run's bits.
// Prints max errors and, for information, the time of the Qwen3-30B-A3B experts shape.
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

// One layer's experts on both backends: bf16 stacks [E][2 inter, hidden] and [E][hidden, inter].
struct ExpertStacks {
  std::int64_t n_experts = 0, inter = 0, hidden = 0;
  std::unique_ptr<Buffer> cpu_gate_up, cpu_down, gpu_gate_up, gpu_down;
  MoeExperts cpu, gpu;
};

class CudaMoe : public MoeVersusCpuTest {
 protected:
  // Uniform bf16 in [-scale, scale) from a fast generator seeded by rng_ (the large stacks hold
  // hundreds of millions of values).
  void fill_uniform_bf16(std::uint16_t* dst, std::size_t n, float scale) {
    std::uint64_t s = (std::uint64_t(rng_()) << 32) ^ rng_();
    for (std::size_t i = 0; i < n; ++i) {
      s += 0x9e3779b97f4a7c15ull;
      std::uint64_t z = s;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      const float u = float(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
      dst[i] = f32_to_bf16((2.0f * u - 1.0f) * scale);
    }
  }

  ExpertStacks make_experts(std::int64_t n_experts, std::int64_t inter, std::int64_t hidden, GatedActivation act) {
    ExpertStacks s;
    s.n_experts = n_experts;
    s.inter = inter;
    s.hidden = hidden;
    const std::size_t gu = std::size_t(n_experts * 2 * inter * hidden), dn = std::size_t(n_experts * hidden * inter);
    s.cpu_gate_up = cpu_.allocate(gu * 2);
    s.cpu_down = cpu_.allocate(dn * 2);
    // uniform(-a, a) has variance a^2 / 3: a = sqrt(3 / fan_in) keeps unit-scale activations.
    fill_uniform_bf16(static_cast<std::uint16_t*>(s.cpu_gate_up->data()), gu, std::sqrt(3.0f / float(hidden)));
    fill_uniform_bf16(static_cast<std::uint16_t*>(s.cpu_down->data()), dn, std::sqrt(3.0f / float(inter)));
    s.gpu_gate_up = gpu_->allocate(gu * 2);
    s.gpu_down = gpu_->allocate(dn * 2);
    gpu_->upload(*s.gpu_gate_up, 0, s.cpu_gate_up->data(), gu * 2);
    gpu_->upload(*s.gpu_down, 0, s.cpu_down->data(), dn * 2);
    s.cpu.gate_up = Tensor::of_batched(*s.cpu_gate_up, DType::bf16, n_experts, 2 * inter, hidden);
    s.cpu.down = Tensor::of_batched(*s.cpu_down, DType::bf16, n_experts, hidden, inter);
    s.cpu.activation = act;
    s.gpu.gate_up = Tensor::of_batched(*s.gpu_gate_up, DType::bf16, n_experts, 2 * inter, hidden);
    s.gpu.down = Tensor::of_batched(*s.gpu_down, DType::bf16, n_experts, hidden, inter);
    s.gpu.activation = act;
    return s;
  }

  // An i32 [rows, cols] device matrix filled with a value no kernel writes.
  Matrix poisoned_ids(std::int64_t rows, std::int64_t cols) {
    std::vector<std::int32_t> v(std::size_t(rows * cols), 0x7fc00001);
    Matrix m{gpu_->allocate(std::max<std::size_t>(v.size(), 1) * 4), {}};
    gpu_->upload(*m.buffer, 0, v.data(), v.size() * 4);
    m.t = Tensor{m.buffer->data(), DType::i32, rows, cols, cols};
    return m;
  }
  std::vector<std::int32_t> gpu_ids(const Matrix& m) {
    std::vector<std::int32_t> v(std::size_t(m.t.rows * m.t.cols));
    gpu_->download(*m.buffer, 0, v.data(), v.size() * 4);
    return v;
  }
  static std::vector<std::int32_t> cpu_ids(const Matrix& m) {
    const auto* p = static_cast<const std::int32_t*>(m.t.data);
    return {p, p + m.t.rows * m.t.cols};
  }

  // Routes `logits` [n, E] on both backends, checks that they agree, and returns the CPU's
  // routing on both (so that moe_experts compares the same routing).
  MoeRouting route(const std::vector<float>& logits, std::int64_t n, std::int64_t n_experts, std::int32_t k,
                   bool renormalize, const std::string& label) {
    MoeRouting r = cpu_routing(logits, n, n_experts, k, renormalize);
    const Matrix gl = device_f32(*gpu_, logits, n, n_experts);
    const Matrix ids = poisoned_ids(n, k), weights = device_f32(*gpu_, {}, n, k);
    gpu_->router_topk(gl.t, {k, renormalize}, ids.t, weights.t);
    const std::vector<std::int32_t> got = gpu_ids(ids), want = cpu_ids(r.cpu_ids);
    std::size_t n_diff = 0;
    for (std::size_t i = 0; i < got.size(); ++i) n_diff += got[i] != want[i];
    EXPECT_EQ(n_diff, 0u) << label << ": router ids differ (first token: gpu " << got[0] << " cpu " << want[0] << ")";
    expect_close(label + " router weights", device_values(*gpu_, weights), host_values(r.cpu_weights), 1e-6f, 1e-5f);
    return r;
  }

  // moe_experts of x [n, hidden] under `routing` on both backends; returns the GPU's output and
  // checks it against the CPU's.
  // `on`: another CUDA backend of the device (the stacks and routing are gpu_'s memory).
  std::vector<float> check_experts(const ExpertStacks& s, const std::vector<std::uint16_t>& x, const MoeRouting& r,
                                   std::int64_t n, std::int64_t k, const std::string& label,
                                   cuda::CudaBackend* on = nullptr) {
    const std::vector<float> want = cpu_experts(s.cpu, s.hidden, s.inter, x, r, n, k);
    const std::vector<float> got = gpu_experts(on ? *on : *gpu_, s.gpu, s.hidden, s.inter, x, r, n, k);
    expect_experts_close(label, got, want);
    return got;
  }

  std::vector<float> random_logits(std::int64_t n, std::int64_t n_experts) {
    return random_f32(std::size_t(n * n_experts), -4.0f, 4.0f);
  }

  // Routes random logits and checks moe_experts for each (n, k) on stacks `s`, on the default
  // backend and, for steps of up to 32 pairs, through the fused decode kernels.
  void run_cases(const ExpertStacks& s, const std::vector<std::pair<std::int64_t, std::int32_t>>& cases) {
    for (const auto& [n, k] : cases) {
      const std::string label = fmt::format("n {} k {} E {} inter {} hidden {} {}", n, k, s.n_experts, s.inter,
                                            s.hidden, s.gpu.activation == GatedActivation::silu ? "silu" : "gelu");
      const MoeRouting r = route(random_logits(n, s.n_experts), n, s.n_experts, k, true, label);
      const auto x = random_bf16(std::size_t(n * s.hidden), 1.0f);
      check_experts(s, x, r, n, k, label);
      if (n * k <= 32 && fused_backend()) check_experts(s, x, r, n, k, label + " fused", fused_backend());
    }
  }
};

TEST_F(CudaMoe, RouterMatchesTheCpu) {
  for (const std::int64_t n_experts : {4, 8, 16, 128}) {
    for (const std::int32_t k : {1, 2, 4, 8}) {
      if (k > n_experts) continue;
      for (const bool renormalize : {true, false}) {
        for (const std::int64_t n : {1, 3, 64, 300}) {
          route(random_logits(n, n_experts), n, n_experts, k, renormalize,
                fmt::format("router n {} E {} k {} renorm {}", n, n_experts, k, renormalize));
        }
      }
    }
  }
}

TEST_F(CudaMoe, RouterTiesGoToTheLowerIndex) {
  const std::int64_t n = 5, n_experts = 16;
  const std::int32_t k = 4;
  std::vector<float> logits(std::size_t(n * n_experts), 0.0f);  // token 0: all equal
  for (std::int64_t e = 0; e < n_experts; ++e) {
    logits[std::size_t(1 * n_experts + e)] = float(e % 3);         // 2 at 2, 5, 8, 11, 14
    logits[std::size_t(2 * n_experts + e)] = e >= 10 ? 1.0f : 0.0f;  // 10..15 tie above the rest
    logits[std::size_t(3 * n_experts + e)] = -float(e / 4);        // 0..3 tie at the top
    logits[std::size_t(4 * n_experts + e)] = float((e * 7) % 5);   // ties of 4 at 3, 8, 13 ...
  }
  const MoeRouting r = route(logits, n, n_experts, k, true, "router ties");
  const std::vector<std::int32_t> ids = cpu_ids(r.cpu_ids);
  EXPECT_EQ(std::vector<std::int32_t>(ids.begin(), ids.begin() + 4), (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(std::vector<std::int32_t>(ids.begin() + 4, ids.begin() + 8), (std::vector<std::int32_t>{2, 5, 8, 11}));
  EXPECT_EQ(std::vector<std::int32_t>(ids.begin() + 8, ids.begin() + 12), (std::vector<std::int32_t>{10, 11, 12, 13}));
  EXPECT_EQ(std::vector<std::int32_t>(ids.begin() + 12, ids.begin() + 16), (std::vector<std::int32_t>{0, 1, 2, 3}));
}

TEST_F(CudaMoe, SmallExpertsBothPaths) {
  const ExpertStacks s = make_experts(4, 64, 64, GatedActivation::silu);
  run_cases(s, {{1, 1}, {3, 2}, {16, 4}, {64, 1}, {64, 4}, {300, 2}});
  const ExpertStacks g = make_experts(16, 64, 2048, GatedActivation::gelu_tanh);
  run_cases(g, {{1, 4}, {16, 4}, {64, 4}, {300, 1}});
}

TEST_F(CudaMoe, MixtralLikeGelu) {
  const ExpertStacks s = make_experts(8, 768, 2048, GatedActivation::gelu_tanh);
  run_cases(s, {{1, 2}, {3, 2}, {16, 2}, {64, 2}, {300, 2}});
}

TEST_F(CudaMoe, WideTopKNarrowHidden) {
  const ExpertStacks s = make_experts(16, 768, 64, GatedActivation::silu);
  run_cases(s, {{1, 8}, {3, 8}, {8, 8}, {16, 8}, {300, 8}});
}

TEST_F(CudaMoe, Qwen3MoeShape) {
  const ExpertStacks s = make_experts(128, 768, 2048, GatedActivation::silu);
  run_cases(s, {{1, 8}, {3, 8}, {16, 8}, {300, 8}});

  // Each path forced at every size (backends built with the GEMVs never or always taken) against
  // the CPU, then (informational) the time of each on the experts of one layer, routed at random.
  std::string reason;
  const auto mma = try_cuda_backend(&reason, {.moe_gemv_max_pairs = 0});
  const auto gemv = try_cuda_backend(&reason, {.moe_gemv_max_pairs = 1 << 30});
  const auto unfused = try_cuda_backend(&reason, {.moe_fused_max_pairs = 0});  // the GEMVs with align and combine
  ASSERT_TRUE(mma && gemv && unfused) << reason;
  const std::vector<std::pair<const char*, cuda::CudaBackend*>> paths = {
      {"default", gpu_.get()}, {"mma", mma.get()}, {"gemv", gemv.get()}, {"unfused", unfused.get()}};
  for (const std::int64_t n : {1, 16, 300}) {
    const MoeRouting r = route(random_logits(n, 128), n, 128, 8, true, fmt::format("forced n {}", n));
    const auto x = random_bf16(std::size_t(n * 2048), 1.0f);
    check_experts(s, x, r, n, 8, fmt::format("n {} k 8 E 128 forced mma", n), mma.get());
    check_experts(s, x, r, n, 8, fmt::format("n {} k 8 E 128 forced gemv", n), gemv.get());
    check_experts(s, x, r, n, 8, fmt::format("n {} k 8 E 128 unfused gemv", n), unfused.get());
  }
  for (const std::int64_t n : {1, 4, 8, 16, 32, 64, 300}) {
    const std::int32_t k = 8;
    const MoeRouting r = route(random_logits(n, 128), n, 128, k, true, fmt::format("timing n {}", n));
    const std::vector<std::int32_t> chosen = cpu_ids(r.cpu_ids);
    const std::set<std::int32_t> distinct(chosen.begin(), chosen.end());
    const double bytes = double(distinct.size()) * (3.0 * 768 * 2048 * 2);
    for (const auto& [name, gpu] : paths) {
      const Matrix gx = device_bf16(*gpu, random_bf16(std::size_t(n * 2048), 1.0f), n, 2048, 2048);
      const Matrix gu = device_bf16(*gpu, {}, n * k, 2 * 768, 2 * 768), act = device_bf16(*gpu, {}, n * k, 768, 768),
                   eo = device_bf16(*gpu, {}, n * k, 2048, 2048), out = device_bf16(*gpu, {}, n, 2048, 2048);
      const float ms = stream_time_ms(
          *gpu, [&] { gpu->moe_experts(gx.t, r.gpu_ids.t, r.gpu_weights.t, s.gpu, {gu.t, act.t, eo.t}, out.t); }, 20);
      std::printf("[ timing   ] qwen3-30b experts %-7s n=%3lld: %8.1f us, %3zu experts, %.0f GB/s of their weights\n",
                  name, static_cast<long long>(n), ms * 1e3, distinct.size(), bytes / (ms * 1e-3) / 1e9);
    }
  }
}

TEST_F(CudaMoe, EveryTokenPicksTheSameExperts) {
  const ExpertStacks s = make_experts(16, 64, 2048, GatedActivation::silu);
  for (const auto& [n, k] : std::vector<std::pair<std::int64_t, std::int32_t>>{{1, 1}, {16, 2}, {64, 4}, {300, 2}}) {
    std::vector<float> logits = random_f32(std::size_t(n * 16), -1.0f, 1.0f);
    for (std::int64_t t = 0; t < n; ++t) {
      // Gaps of 4 over noise of width 2: slot j is expert 5 + 3 j for every token.
      for (std::int32_t j = 0; j < k; ++j) logits[std::size_t(t * 16 + 5 + 3 * j)] += 20.0f - 4.0f * float(j);
    }
    const std::string label = fmt::format("same experts n {} k {}", n, k);
    const MoeRouting r = route(logits, n, 16, k, true, label);
    const std::vector<std::int32_t> ids = cpu_ids(r.cpu_ids);
    for (std::size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(ids[i], 5 + 3 * std::int32_t(i % std::size_t(k))) << label;
    const auto x = random_bf16(std::size_t(n * 2048), 1.0f);
    check_experts(s, x, r, n, k, label);
    if (n * k <= 32 && fused_backend()) check_experts(s, x, r, n, k, label + " fused", fused_backend());
  }
}

TEST_F(CudaMoe, MostExpertsGetNoToken) {
  const ExpertStacks s = make_experts(128, 64, 64, GatedActivation::gelu_tanh);
  for (const std::int64_t n : {3, 300}) {
    std::vector<float> logits = random_f32(std::size_t(n * 128), -1.0f, 1.0f);
    for (std::int64_t t = 0; t < n; ++t) {
      logits[std::size_t(t * 128 + (t % 2 ? 2 : 77))] += 10.0f;
      logits[std::size_t(t * 128 + (t % 2 ? 77 : 2))] += 9.0f;
    }
    const std::string label = fmt::format("two experts of 128, n {}", n);
    const MoeRouting r = route(logits, n, 128, 2, false, label);
    const auto x = random_bf16(std::size_t(n * 64), 1.0f);
    check_experts(s, x, r, n, 2, label);
    if (n * 2 <= 32 && fused_backend()) check_experts(s, x, r, n, 2, label + " fused", fused_backend());
  }
}

TEST_F(CudaMoe, CapturedStepReplaysOtherRoutings) {
  const ExpertStacks s = make_experts(16, 768, 2048, GatedActivation::silu);
  // The default backend (align, GEMVs or GEMMs, combine) and the fused decode kernels.
  for (cuda::CudaBackend* gpu : {gpu_.get(), fused_backend()}) {
    ASSERT_NE(gpu, nullptr);
    const char* path = gpu == gpu_.get() ? "default" : "fused";
    for (const auto& [n, k] : std::vector<std::pair<std::int64_t, std::int32_t>>{{3, 4}, {16, 2}, {16, 4}, {64, 4}, {300, 2}}) {
      if (gpu != gpu_.get() && n * k > 32) continue;
      const std::string label = fmt::format("graph {} n {} k {}", path, n, k);
      const auto x = random_bf16(std::size_t(n * 2048), 1.0f);
      gpu_->synchronize();
      const Matrix gx = device_bf16(*gpu, x, n, 2048, 2048);
      const Matrix logits = device_f32(*gpu, random_logits(n, 16), n, 16);
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
        const std::vector<float> new_logits = random_logits(n, 16);
        gpu->upload(*logits.buffer, 0, new_logits.data(), new_logits.size() * 4);
        gpu->replay(*graph);
        gpu->synchronize();
        const std::vector<float> replayed = device_values(*gpu, out);
        std::vector<std::int32_t> replayed_ids(std::size_t(n * k));
        gpu->download(*ids.buffer, 0, replayed_ids.data(), replayed_ids.size() * 4);
        // The same routing eagerly, and on the CPU.
        const MoeRouting r = route(new_logits, n, 16, k, true, label);
        EXPECT_EQ(replayed_ids, cpu_ids(r.cpu_ids)) << label;
        step();
        gpu->synchronize();
        const std::vector<float> eager = device_values(*gpu, out);
        EXPECT_EQ(std::memcmp(replayed.data(), eager.data(), eager.size() * 4), 0) << label << ": replay != eager";
        check_experts(s, x, r, n, k, fmt::format("{} round {}", label, round), gpu);
      }
      EXPECT_EQ(gpu->graph_generation(), generation) << label << ": the workspace moved";
    }
  }
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
