// Flare's tensor-core streaming GEMM (kernels/stream_gemm.cu, sm_90 only; skipped elsewhere):
// every split variant and x-row tile against the CPU backend for m 9..128 (tiles 32, 64, 128 with
// rows past m), n 200 and 4103 (partial 128-row tiles), k 72 and 4104 (partial 64-wide k blocks),
// strided x and w rows, with and without bias, BF16 and F32 outputs whose padding is poisoned
// before every run; split runs are bit-identical run to run (partials are summed in rank order).
// Then its place in the GEMM race:
// for the Llama-3.1-8B decode GEMMs at batch 64 a race over cuBLASLt's candidates and the stream
// variants records a winner that replays bit-identically eagerly and inside a graph, and the test
// prints cuBLASLt's best against the stream kernel's best (informational, not asserted); and a
// frozen table's stream choices run through CudaBackend::linear, eagerly and in a graph; with the
// backend's stream_gemm option off, it is left out.
#ifdef FLARE_HAVE_CUDA

#include <functional>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bench/cuda/device_fill.h"
#include "bench/cuda/device_rates.h"
#include "bench/cuda/event_timer.h"
#include "gemm_test_support.h"
#include "helios/cuda/cublaslt.h"
#include "helios/cuda/gemm_runner.h"
#include "helios/cuda/kernel_sources.h"
#include "helios/cuda/stream_gemm.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

using CudaStreamGemm = StreamGemmVersusCpuTest;

TEST_F(CudaStreamGemm, EveryVariantMatchesTheCpu) {
  const int n_runs = compare_every_variant_with_the_cpu(
      {9, 31, 64, 100, 128}, {200, 4103}, {72, 4104}, k_stream_gemm_n_variants,
      [](int v) { return fmt::format("splits {}", k_stream_gemm_splits[std::size_t(v)]); },
      [&](const cuda::GemmOperands& op, int v) {
        if (!stream_->takes(op, v)) {
          EXPECT_GT(k_stream_gemm_splits[std::size_t(v)], (op.k + 63) / 64) << "only more splits than k blocks are refused";
          return false;
        }
        EXPECT_TRUE(stream_->enqueue(op, v, gpu_->stream()));
        return true;
      });
  std::printf("[ stream   ] %d runs compared\n", n_runs);
  EXPECT_GT(n_runs, 150);
}

TEST_F(CudaStreamGemm, SplitRunsAreBitIdenticalAndRepeatable) {
  // Dense rows (a real model's weights); each variant three times: the same bits every time (the
  // partials are summed in a fixed order).
  const std::int64_t m = 64, n = 1000, k = 4096;
  const auto x = uniform_bf16(std::size_t(m * k), 1.0f), w = uniform_bf16(std::size_t(n * k), 0.05f);
  const std::vector<float> ref = cpu_reference(x, k, w, k, nullptr, m, n, k);
  const Matrix gx = device_bf16(*gpu_, x, m, k, k), gw = device_bf16(*gpu_, w, n, k, k);
  for (int v = 0; v < k_stream_gemm_n_variants; ++v) {
    std::vector<float> first;
    for (int run = 0; run < 3; ++run) {
      const Matrix o = poisoned_out(DType::f32, m, n, n);
      ASSERT_TRUE(stream_->enqueue(operands(gx, gw, nullptr, o), v, gpu_->stream()));
      const std::vector<float> got = out_values(o, "run");
      if (run == 0) {
        double max_abs = 0.0;
        EXPECT_TRUE(within_tolerance(got, ref, true, &max_abs)) << "variant " << v << ": " << max_abs;
        first = got;
      } else {
        EXPECT_EQ(std::memcmp(got.data(), first.data(), got.size() * 4), 0) << "variant " << v << " run " << run;
      }
    }
  }
}

// A package's frozen table naming stream variants: CudaBackend::linear runs them (modules built for
// sm_90a by the backend, programmatic dependent launch as the backend launches it, bias included,
// BF16 and F32 outputs), eagerly and inside a graph capture, with no timing.
TEST_F(CudaStreamGemm, FrozenStreamChoicesRunThroughTheBackend) {
  if (gpu_->gemm_engine_name() != "cublaslt") GTEST_SKIP() << "cuBLASLt did not load";
  ASSERT_TRUE(gpu_->has_stream_gemm()) << "the backend left the stream GEMM out on sm_90";
  for (int v = 0; v < k_stream_gemm_n_variants; ++v) {
    expect_frozen_choice_runs_through_the_backend(40, 777, 1032, {.kind = GemmKind::stream, .variant = std::uint8_t(v)},
                                                  fmt::format("splits {}", k_stream_gemm_splits[std::size_t(v)]));
  }
}

// CudaBackendOptions::stream_gemm off (--no-stream-gemm): the backend leaves the stream GEMM out of
// its races and compiles none of its modules, so an export made so would carry none.
TEST_F(CudaStreamGemm, OptionOffLeavesItOut) {
  if (gpu_->gemm_engine_name() != "cublaslt") GTEST_SKIP() << "cuBLASLt did not load";
  std::string reason;
  const std::unique_ptr<cuda::CudaBackend> without = try_cuda_backend(&reason, {.stream_gemm = false});
  ASSERT_TRUE(without) << reason;
  EXPECT_FALSE(without->has_stream_gemm());
  for (const auto& [key, image] : without->loaded_images()) {
    EXPECT_NE(key.rfind(cuda::k_stream_gemm_source, 0), 0u) << key;
  }
}

// The Llama-3.1-8B decode GEMMs at batch 64: the race with the stream variants as entrants records
// a winner that replays to the same bits eagerly and in a graph; then, informational, cuBLASLt's
// best (its own race) against each split of the stream kernel, weights rotating over copies that
// together exceed L2, as 32 layers do.
TEST_F(CudaStreamGemm, DecodeBatch64RaceAndTimings) {
  if (gpu_->gemm_engine_name() != "cublaslt") GTEST_SKIP() << "cuBLASLt did not load";
  const cuda::CublasLt lt(cuda::k_default_cuda_root);
  bench::cuda::DeviceFill fill(*gpu_);
  bench::DeviceRates rates;
  bench::cuda::measure_copy_bandwidth(*gpu_, std::uint64_t(1) << 30, bench::BenchOptions{}, rates);
  std::printf("[ batch 64 ] copy bandwidth %.0f GB/s (read + write)\n", rates.copy_gbs);
  struct Shape {
    const char* what;
    std::int64_t n, k;
  };
  const std::int64_t m = 64;
  for (const Shape s : {Shape{"qkv", 6144, 4096}, Shape{"o", 4096, 4096}, Shape{"gate_up", 28672, 4096},
                        Shape{"down", 4096, 14336}}) {
    const std::uint64_t w_bytes = std::uint64_t(s.n * s.k * 2);
    const std::size_t n_copies = std::size_t(std::max<std::uint64_t>(1, (std::uint64_t(256) << 20) / w_bytes + 1));
    std::vector<std::unique_ptr<Buffer>> weights;
    std::vector<Tensor> w;
    for (std::size_t c = 0; c < n_copies; ++c) {
      weights.push_back(gpu_->allocate(w_bytes));
      w.push_back(Tensor::of(*weights.back(), DType::bf16, s.n, s.k));
      fill.tensor(w.back(), 100 + c, 0.05f);
    }
    auto x_buf = gpu_->allocate(std::size_t(m * s.k) * 2);
    const Tensor x = Tensor::of(*x_buf, DType::bf16, m, s.k);
    fill.tensor(x, 7, 1.0f);
    const auto op_of = [&](std::size_t c, const Matrix& o) {
      return cuda::GemmOperands{.x = CUdeviceptr(x.data), .x_stride = s.k, .w = CUdeviceptr(w[c].data),
                                .w_stride = s.k, .bias = 0, .out = CUdeviceptr(o.t.data), .out_stride = s.n,
                                .out_dtype = DType::bf16, .m = m, .n = s.n, .k = s.k};
    };

    // The race and its replays.
    cuda::GemmRunner runner(lt, gpu_->device().arch(), gpu_->stream());
    runner.set_stream_gemm(make_stream());
    runner.set_l2_bytes(gpu_->device().l2_bytes);  // qkv and o race over copies of their weights
    GemmTuning tuning;
    const Matrix first_out = poisoned_out(DType::bf16, m, s.n, s.n);
    ASSERT_EQ(runner.run(op_of(0, first_out), tuning), cuda::GemmResult::done);
    const std::vector<float> first = out_values(first_out, s.what);
    const GemmShapeKey key{m, s.n, s.k, DType::bf16, DType::bf16, false, GemmFusion::none, gpu_->device().arch(),
                           lt.version()};
    const GemmChoice* won = tuning.find(key);
    ASSERT_NE(won, nullptr);
    const Matrix again = poisoned_out(DType::bf16, m, s.n, s.n);
    runner.run(op_of(0, again), tuning);
    EXPECT_EQ(out_values(again, s.what), first) << s.what << ": the plan replays its winner";
    const Matrix g = poisoned_out(DType::bf16, m, s.n, s.n);
    auto graph = gpu_->capture([&] { runner.run(op_of(0, g), tuning); });  // the runner enqueues on the backend's stream
    ASSERT_NE(graph, nullptr);
    gpu_->replay(*graph);
    gpu_->synchronize();
    EXPECT_EQ(out_values(g, s.what), first) << s.what << ": the graph replays the same kernel";

    // Informational timings.
    const Matrix o = poisoned_out(DType::bf16, m, s.n, s.n);
    // Device time per GEMM: 20 launches captured in a graph, so host launch costs do not count.
    const auto time_us = [&](const std::function<void(const cuda::GemmOperands&)>& enqueue) {
      constexpr int k_per_graph = 20;
      auto timed = gpu_->capture([&] {
        for (int i = 0; i < k_per_graph; ++i) enqueue(op_of(std::size_t(i) % n_copies, o));
      });
      const bench::Timing t = bench::cuda::time_runs(gpu_->stream(), 2, 10, [&] { gpu_->replay(*timed); });
      return 1000.0 * t.median_ms / k_per_graph;
    };
    cuda::GemmRunner cublaslt_only(lt, gpu_->device().arch(), gpu_->stream());
    cublaslt_only.set_l2_bytes(gpu_->device().l2_bytes);
    GemmTuning lt_tuning;
    cublaslt_only.run(op_of(0, o), lt_tuning);
    const double lt_us = time_us([&](const cuda::GemmOperands& op) { cublaslt_only.run(op, lt_tuning); });
    const double bound_us = double(w_bytes) / (rates.copy_gbs * 1e3);
    std::string splits;
    double best_us = 0.0;
    int best_v = -1;
    for (int v = 0; v < k_stream_gemm_n_variants; ++v) {
      if (!stream_->takes(op_of(0, o), v)) continue;
      const double us = time_us([&](const cuda::GemmOperands& op) { stream_->enqueue(op, v, gpu_->stream()); });
      splits += fmt::format(" {}:{:.1f}", k_stream_gemm_splits[std::size_t(v)], us);
      if (best_v < 0 || us < best_us) best_us = us, best_v = v;
    }
    const bench::Timing eager = bench::cuda::time_runs(gpu_->stream(), 3, 20, [&] {
      stream_->enqueue(op_of(0, o), best_v, gpu_->stream());
    });
    std::printf("[ batch 64 ] %-8s n %6lld k %5lld: cublaslt %7.2f us (%3.0f%% of bound)   stream splits %d %7.2f us "
                "(%3.0f%%; eager %.2f us, host enqueue %.2f us); race won by %s %u; us by splits%s\n",
                s.what, (long long)s.n, (long long)s.k, lt_us, 100.0 * bound_us / lt_us,
                k_stream_gemm_splits[std::size_t(best_v)], best_us, 100.0 * bound_us / best_us,
                1000.0 * eager.median_ms, 1000.0 * eager.host_enqueue_ms,
                won->kind == GemmKind::stream ? "stream" : "cublaslt", unsigned(won->variant), splits.c_str());
  }
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
