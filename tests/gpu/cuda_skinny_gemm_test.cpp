// Flare's skinny GEMM (kernels/skinny_gemm.cu) on the GPU: every variant and m tile against the CPU
// backend for m 1..16 (odd m included), n 1, 7, 64, 4103 (partial row blocks), k 8, 64, 4096, 4104,
// strided x and w rows, with and without bias, BF16 and F32 outputs whose padding is poisoned before
// every run; then its place in the GEMM race: a race over cuBLASLt's candidates and the skinny
// variants records a winner that replays bit-identically (same runner, a frozen table in a new
// runner, a captured graph), and a frozen skinny choice runs through CudaBackend::linear. Prints,
// for the Llama-3.1-8B decode GEMMs (m 1), cuBLASLt's best against the skinny kernel's best
// (informational, not asserted).
#ifdef FLARE_HAVE_CUDA

#include <cstring>
#include <map>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bench/cuda/device_fill.h"
#include "bench/cuda/device_rates.h"
#include "bench/cuda/event_timer.h"
#include "gemm_test_support.h"
#include "helios/cpu/cpu_backend.h"
#include "helios/cuda/cublaslt.h"
#include "helios/cuda/gemm_runner.h"
#include "helios/cuda/kernel_sources.h"
#include "helios/cuda/skinny_gemm.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

class CudaSkinnyGemm : public GemmVersusCpuTest {
 protected:
  void SetUp() override {
    GemmVersusCpuTest::SetUp();
    if (!gpu_) return;  // skipped
    load_tile_modules(cuda::k_skinny_gemm_source, "SKINNY_M", cuda::SkinnyGemm::k_tiles, gpu_->device().arch());
    skinny_ = make_skinny();
  }

  std::unique_ptr<cuda::SkinnyGemm> make_skinny() {
    return std::make_unique<cuda::SkinnyGemm>(
        [this](const std::string& entry, int tile) { return tile_function(entry, tile); }, false);
  }

  std::unique_ptr<cuda::SkinnyGemm> skinny_;
};

TEST_F(CudaSkinnyGemm, EveryVariantMatchesTheCpu) {
  const int n_runs = compare_every_variant_with_the_cpu(
      {1, 2, 3, 4, 5, 8, 13, 16}, {1, 7, 64, 4103}, {8, 64, 4096, 4104}, k_skinny_gemm_n_variants,
      [](int v) { return fmt::format("variant {}", v); },
      [&](const cuda::GemmOperands& op, int v) {
        EXPECT_TRUE(cuda::SkinnyGemm::supports(op));
        EXPECT_TRUE(skinny_->enqueue(op, v, gpu_->stream()));
        return true;
      });
  std::printf("[ skinny   ] %d runs compared\n", n_runs);
  EXPECT_EQ(n_runs, 8 * 4 * 4 * 2 * k_skinny_gemm_n_variants);
}

TEST_F(CudaSkinnyGemm, DenseRowsAndRunsAreBitIdentical) {
  // Rows exactly k wide (the weights of a real model), and the same run twice gives the same bits.
  for (const std::int64_t m : {1, 6, 16}) {
    const std::int64_t n = 1000, k = 2048;
    const auto x = uniform_bf16(std::size_t(m * k), 1.0f), w = uniform_bf16(std::size_t(n * k), 0.05f);
    const std::vector<float> ref = cpu_reference(x, k, w, k, nullptr, m, n, k);
    const Matrix gx = device_bf16(*gpu_, x, m, k, k), gw = device_bf16(*gpu_, w, n, k, k);
    for (int v = 0; v < k_skinny_gemm_n_variants; ++v) {
      const Matrix a = poisoned_out(DType::f32, m, n, n), b = poisoned_out(DType::f32, m, n, n);
      ASSERT_TRUE(skinny_->enqueue(operands(gx, gw, nullptr, a), v, gpu_->stream()));
      ASSERT_TRUE(skinny_->enqueue(operands(gx, gw, nullptr, b), v, gpu_->stream()));
      const std::vector<float> got_a = out_values(a, "a"), got_b = out_values(b, "b");
      double max_abs = 0.0;
      EXPECT_TRUE(within_tolerance(got_a, ref, true, &max_abs)) << "m " << m << " variant " << v << ": " << max_abs;
      EXPECT_EQ(std::memcmp(got_a.data(), got_b.data(), got_a.size() * 4), 0) << "m " << m << " variant " << v;
    }
  }
}

// A race with the skinny variants as entrants: it records some winner, which replays to the same
// bits from the runner's plan, from a frozen copy of the table in a new runner, and inside a graph.
TEST_F(CudaSkinnyGemm, RaceRecordsAWinnerThatReplaysBitIdentically) {
  if (gpu_->gemm_engine_name() != "cublaslt") GTEST_SKIP() << "cuBLASLt did not load";
  const cuda::CublasLt lt(cuda::k_default_cuda_root);
  const cuda::Driver& d = cuda::driver();
  struct Problem {
    std::int64_t m, n, k;
    bool bias_on;
  };
  for (const Problem p : {Problem{1, 4096, 4096, false}, Problem{3, 1536, 2048, true}, Problem{16, 640, 4104, false}}) {
    const std::int64_t m = p.m, n = p.n, k = p.k;
    const bool bias_on = p.bias_on;
    const auto x = uniform_bf16(std::size_t(m * k), 1.0f), w = uniform_bf16(std::size_t(n * k), 0.05f);
    const std::vector<float> bias(std::size_t(n), 0.25f);
    const Matrix gx = device_bf16(*gpu_, x, m, k, k), gw = device_bf16(*gpu_, w, n, k, k);
    const Matrix gb = device_f32(*gpu_, bias, 1, n);
    const std::vector<float> ref = cpu_reference(x, k, w, k, bias_on ? &bias : nullptr, m, n, k);
    // The output as F32 values, with the bias added on the host where the runner left it pending.
    const auto values = [&](const Matrix& o, cuda::GemmResult r) {
      EXPECT_NE(r, cuda::GemmResult::unsupported);
      std::vector<float> v = out_values(o, "race");
      if (r == cuda::GemmResult::bias_pending) {
        for (std::size_t i = 0; i < v.size(); ++i) v[i] += bias[i % std::size_t(n)];
      }
      return v;
    };
    const auto run = [&](cuda::GemmRunner& runner, GemmTuning& tuning) {
      const Matrix o = poisoned_out(DType::f32, m, n, n);
      return values(o, runner.run(operands(gx, gw, bias_on ? &gb : nullptr, o), tuning));
    };
    cuda::GemmRunner runner(lt, gpu_->device().arch(), gpu_->stream(), make_skinny());
    GemmTuning tuning;
    const std::vector<float> first = run(runner, tuning);
    EXPECT_EQ(tuning.n_timed(), 1);
    const GemmShapeKey key{GemmTuning::bucket_m(m), n, k, DType::f32, DType::bf16, bias_on, GemmFusion::none,
                           gpu_->device().arch(), lt.version()};
    const GemmChoice* won = tuning.find(key);
    ASSERT_NE(won, nullptr);
    EXPECT_GE(won->n_candidates, 1 + k_skinny_gemm_n_variants) << "cuBLASLt's candidates and every skinny variant";
    std::printf("[ race     ] [%lld, %lld] x [%lld, %lld]^T%s: %s variant %u, %.2f us, best of %u\n", (long long)m,
                (long long)k, (long long)n, (long long)k, bias_on ? " + bias" : "",
                won->kind == GemmKind::skinny ? "skinny" : "cublaslt", unsigned(won->variant), won->time_us,
                unsigned(won->n_candidates));
    double max_abs = 0.0;
    EXPECT_TRUE(within_tolerance(first, ref, true, &max_abs)) << max_abs;
    EXPECT_EQ(run(runner, tuning), first) << "the plan replays its winner";

    GemmTuning frozen = GemmTuning::parse(tuning.serialize());
    frozen.set_frozen(true);
    cuda::GemmRunner fresh(lt, gpu_->device().arch(), gpu_->stream(), make_skinny());
    EXPECT_EQ(run(fresh, frozen), first) << "a frozen table replays the same kernel";
    EXPECT_EQ(frozen.n_timed(), 0);

    // The same plan captured into a graph (planned above, so the capture only enqueues).
    const Matrix o = poisoned_out(DType::f32, m, n, n);
    const cuda::GemmOperands op = operands(gx, gw, bias_on ? &gb : nullptr, o);
    gpu_->synchronize();
    cuda::check(d.stream_begin_capture(gpu_->stream().handle(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                "cuStreamBeginCapture");
    const cuda::GemmResult captured = fresh.run(op, frozen);
    CUgraph graph = nullptr;
    cuda::check(d.stream_end_capture(gpu_->stream().handle(), &graph), "cuStreamEndCapture");
    CUgraphExec exec = nullptr;
    cuda::check(d.graph_instantiate(&exec, graph, 0), "cuGraphInstantiate");
    cuda::check(d.graph_launch(exec, gpu_->stream().handle()), "cuGraphLaunch");
    gpu_->synchronize();
    d.graph_exec_destroy(exec);
    d.graph_destroy(graph);
    EXPECT_EQ(values(o, captured), first) << "the graph replays the same kernel";
  }
}

// A package's frozen table naming skinny variants: CudaBackend::linear runs them (bias included,
// BF16 and F32 outputs), eagerly and inside a graph capture, with no timing.
TEST_F(CudaSkinnyGemm, FrozenSkinnyChoicesRunThroughTheBackend) {
  if (gpu_->gemm_engine_name() != "cublaslt") GTEST_SKIP() << "cuBLASLt did not load";
  for (int v = 0; v < k_skinny_gemm_n_variants; ++v) {
    expect_frozen_choice_runs_through_the_backend(5, 777, 1032, {.kind = GemmKind::skinny, .variant = std::uint8_t(v)},
                                                  fmt::format("variant {}", v));
  }
}

// Informational: for each Llama-3.1-8B decode GEMM (m 1, BF16 out; the vocabulary head F32), the
// best of cuBLASLt's raced candidates against the best skinny variant, with weight-read GB/s and
// the device's copy bandwidth. Weights rotate over copies that together exceed L2, as 32 layers do.
TEST_F(CudaSkinnyGemm, DecodeShapesCublasltVersusSkinny) {
  if (gpu_->gemm_engine_name() != "cublaslt") GTEST_SKIP() << "cuBLASLt did not load";
  const cuda::CublasLt lt(cuda::k_default_cuda_root);
  bench::cuda::DeviceFill fill(*gpu_);
  bench::DeviceRates rates;
  bench::cuda::measure_copy_bandwidth(*gpu_, std::uint64_t(1) << 30, bench::BenchOptions{}, rates);
  std::printf("[ decode   ] copy bandwidth %.0f GB/s (read + write)\n", rates.copy_gbs);
  struct Shape {
    const char* what;
    std::int64_t n, k;
    DType out;
  };
  for (const Shape s : {Shape{"qkv", 6144, 4096, DType::bf16}, Shape{"o", 4096, 4096, DType::bf16},
                        Shape{"gate_up", 28672, 4096, DType::bf16}, Shape{"down", 4096, 14336, DType::bf16},
                        Shape{"lm_head", 128256, 4096, DType::f32}}) {
    const std::uint64_t w_bytes = std::uint64_t(s.n * s.k * 2);
    const std::size_t n_copies = std::size_t(std::max<std::uint64_t>(1, (std::uint64_t(256) << 20) / w_bytes + 1));
    std::vector<std::unique_ptr<Buffer>> weights;
    std::vector<Tensor> w;
    for (std::size_t c = 0; c < n_copies; ++c) {
      weights.push_back(gpu_->allocate(w_bytes));
      w.push_back(Tensor::of(*weights.back(), DType::bf16, s.n, s.k));
      fill.tensor(w.back(), 100 + c, 0.05f);
    }
    auto x_buf = gpu_->allocate(std::size_t(s.k) * 2), out_buf = gpu_->allocate(std::size_t(s.n) * 4);
    const Tensor x = Tensor::of(*x_buf, DType::bf16, 1, s.k);
    const Tensor out = Tensor::of(*out_buf, s.out, 1, s.n);
    fill.tensor(x, 7, 1.0f);
    const auto op_of = [&](std::size_t c) {
      return cuda::GemmOperands{.x = CUdeviceptr(x.data), .x_stride = s.k, .w = CUdeviceptr(w[c].data),
                                .w_stride = s.k, .bias = 0, .out = CUdeviceptr(out.data), .out_stride = s.n,
                                .out_dtype = s.out, .m = 1, .n = s.n, .k = s.k};
    };
    const auto time_us = [&](const std::function<void(const cuda::GemmOperands&)>& enqueue) {
      std::size_t c = 0;
      const bench::Timing t = bench::cuda::time_runs(gpu_->stream(), 10, 50, [&] { enqueue(op_of(c++ % n_copies)); });
      return 1000.0 * t.median_ms;
    };
    cuda::GemmRunner cublaslt_only(lt, gpu_->device().arch(), gpu_->stream());
    GemmTuning tuning;
    cublaslt_only.run(op_of(0), tuning);  // races cuBLASLt's candidates
    const double lt_us = time_us([&](const cuda::GemmOperands& op) { cublaslt_only.run(op, tuning); });
    double best_us = 0.0;
    int best_v = -1;
    for (int v = 0; v < k_skinny_gemm_n_variants; ++v) {
      const double us = time_us([&](const cuda::GemmOperands& op) { skinny_->enqueue(op, v, gpu_->stream()); });
      if (best_v < 0 || us < best_us) best_us = us, best_v = v;
    }
    const double bound_us = double(w_bytes) / (rates.copy_gbs * 1e3);  // as the bench's breakdown: bytes at copy GB/s
    std::printf("[ decode   ] %-8s n %6lld k %5lld: cublaslt %7.2f us %5.0f GB/s (%3.0f%% of bound)   skinny v%d %7.2f us "
                "%5.0f GB/s (%3.0f%%)\n",
                s.what, (long long)s.n, (long long)s.k, lt_us, double(w_bytes) / (lt_us * 1e3), 100.0 * bound_us / lt_us,
                best_v, best_us, double(w_bytes) / (best_us * 1e3), 100.0 * bound_us / best_us);
  }
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
