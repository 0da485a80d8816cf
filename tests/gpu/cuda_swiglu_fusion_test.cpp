// The streaming GEMM with SwiGLU in its epilogue (kernels/stream_gemm.cu, sm_90 only; skipped
// elsewhere) and Backend::linear_swiglu on the CUDA backend:
// - every split variant, for m 9..128, inter 200 and 1024 (a partial 64-column tile), k 72 and 4104
//   (a partial k block), strided x and weight rows, writes exactly the bits of the same variant's
//   plain GEMM followed by the backend's swiglu kernel, into a poisoned, padded output;
// - through the backend, every variant named by a frozen tuning table matches the CPU's linear then
//   swiglu, leaves the gate_up scratch unwritten (so the fused kernel ran), replays its eager bits
//   from a graph and times nothing; and whatever the race picks matches the CPU too.
#ifdef FLARE_HAVE_CUDA

#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gemm_test_support.h"
#include "helios/cuda/cublaslt.h"
#include "helios/cuda/gemm_runner.h"
#include "helios/cuda/kernel_sources.h"
#include "helios/cuda/stream_gemm.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

class CudaSwigluFusion : public StreamGemmVersusCpuTest {
 protected:
  // The CPU's linear then swiglu of x [m, k] and the gate_up weight [2 x inter, k] (dense copies).
  std::vector<float> cpu_linear_swiglu(const std::vector<std::uint16_t>& x, const std::vector<std::uint16_t>& w,
                                       std::int64_t m, std::int64_t inter, std::int64_t k) {
    Matrix cx = host_f32(cpu_, x, m, k), cw = host_bf16(w, 2 * inter, k);
    Matrix gate_up = host_f32(cpu_, {}, m, 2 * inter), out = host_f32(cpu_, {}, m, inter);
    cpu_.linear_swiglu(cx.t, cw.t, gate_up.t, out.t);
    return host_values(out);
  }
};

TEST_F(CudaSwigluFusion, EveryVariantWritesThePlainKernelsBits) {
  int n_runs = 0;
  for (const std::int64_t m : {9, 40, 64, 128}) {
    for (const std::int64_t inter : {200, 1024}) {
      for (const std::int64_t k : {72, 4104}) {
        const auto x = uniform_bf16(std::size_t(m * k), 1.0f), w = uniform_bf16(std::size_t(2 * inter * k), 0.05f);
        const Matrix gx = device_bf16(*gpu_, x, m, k, k + 8), gw = device_bf16(*gpu_, w, 2 * inter, k, k + 16);
        const std::vector<float> cpu = cpu_linear_swiglu(x, w, m, inter, k);
        for (int v = 0; v < k_stream_gemm_n_variants; ++v) {
          const std::string label =
              fmt::format("m {} inter {} k {} splits {}", m, inter, k, k_stream_gemm_splits[std::size_t(v)]);
          const Matrix gate_up = poisoned_out(DType::bf16, m, 2 * inter, 2 * inter);
          const Matrix plain = poisoned_out(DType::bf16, m, inter, inter + 5);
          const Matrix fused = poisoned_out(DType::bf16, m, inter, inter + 5);
          if (!stream_->takes_swiglu(operands(gx, gw, nullptr, fused), v)) {
            EXPECT_GT(k_stream_gemm_splits[std::size_t(v)], (k + 63) / 64)
                << label << ": only more splits than k blocks are refused";
            continue;
          }
          ASSERT_TRUE(stream_->enqueue(operands(gx, gw, nullptr, gate_up), v, gpu_->stream())) << label;
          gpu_->swiglu(gate_up.t, plain.t);
          ASSERT_TRUE(stream_->enqueue_swiglu(operands(gx, gw, nullptr, fused), v, gpu_->stream())) << label;
          const std::vector<float> want = out_values(plain, label + " plain");
          const std::vector<float> got = out_values(fused, label + " fused");
          EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
              << label << ": not the plain kernels' bits";
          expect_close(label, got, cpu, 2e-2f, 2e-2f);
          ++n_runs;
        }
      }
    }
  }
  std::printf("[ swiglu   ] %d fused runs compared\n", n_runs);
  EXPECT_EQ(n_runs, 72) << "k 72 has two k blocks: splits 1 and 2 only";
}

TEST_F(CudaSwigluFusion, BackendRunsFrozenAndRacedChoices) {
  if (gpu_->gemm_engine_name() != "cublaslt") GTEST_SKIP() << "cuBLASLt did not load";
  ASSERT_TRUE(gpu_->has_stream_gemm()) << "the backend left the stream GEMM out on sm_90";
  const cuda::CublasLt lt(cuda::k_default_cuda_root);
  const std::int64_t m = 48, inter = 704, k = 1032;
  const auto x = uniform_bf16(std::size_t(m * k), 1.0f), w = uniform_bf16(std::size_t(2 * inter * k), 0.05f);
  const Matrix gx = device_bf16(*gpu_, x, m, k, k + 8), gw = device_bf16(*gpu_, w, 2 * inter, k, k);
  const std::vector<float> cpu = cpu_linear_swiglu(x, w, m, inter, k);
  for (int v = 0; v < k_stream_gemm_n_variants; ++v) {
    const std::string label = fmt::format("frozen splits {}", k_stream_gemm_splits[std::size_t(v)]);
    GemmTuning table;
    table.insert({GemmTuning::bucket_m(m), 2 * inter, k, DType::bf16, DType::bf16, false, GemmFusion::swiglu,
                  gpu_->device().arch(), lt.version()},
                 {.kind = GemmKind::stream_swiglu, .variant = std::uint8_t(v), .time_us = 1.0f, .n_candidates = 1});
    GemmTuning frozen = GemmTuning::parse(table.serialize());
    frozen.set_frozen(true);
    gpu_->install_gemm_tuning(std::move(frozen));
    const Matrix gate_up = poisoned_out(DType::bf16, m, 2 * inter, 2 * inter);
    const Matrix out = poisoned_out(DType::bf16, m, inter, inter + 3);
    gpu_->linear_swiglu(gx.t, gw.t, gate_up.t, out.t);
    const std::vector<float> eager = out_values(out, label);
    expect_close(label, eager, cpu, 2e-2f, 2e-2f);
    const std::vector<float> scratch = device_values(*gpu_, gate_up);
    EXPECT_TRUE(std::isnan(scratch.front()) && std::isnan(scratch.back())) << label << ": gate_up was written";

    const Matrix replayed = poisoned_out(DType::bf16, m, inter, inter + 3);
    const auto graph = gpu_->capture([&] { gpu_->linear_swiglu(gx.t, gw.t, gate_up.t, replayed.t); });
    ASSERT_NE(graph, nullptr);
    gpu_->replay(*graph);
    gpu_->synchronize();
    EXPECT_EQ(out_values(replayed, label + " (graph)"), eager) << label;
    EXPECT_EQ(gpu_->gemm_tuning().n_timed(), 0) << label;
  }

  gpu_->install_gemm_tuning(GemmTuning{});  // races, in memory
  for (const std::int64_t rows : {std::int64_t(1), std::int64_t(16), m}) {
    const Matrix xs{nullptr, Tensor{gx.t.data, DType::bf16, rows, k, gx.t.stride}};
    const Matrix gate_up = poisoned_out(DType::bf16, rows, 2 * inter, 2 * inter);
    const Matrix out = poisoned_out(DType::bf16, rows, inter, inter + 3);
    gpu_->linear_swiglu(xs.t, gw.t, gate_up.t, out.t);
    const std::vector<float> got = out_values(out, fmt::format("raced m {}", rows));
    const std::vector<float> want(cpu.begin(), cpu.begin() + rows * inter);
    expect_close(fmt::format("raced m {}", rows), got, want, 2e-2f, 2e-2f);
  }
  EXPECT_GT(gpu_->gemm_tuning().n_timed(), 0);
  gpu_->install_gemm_tuning(GemmTuning{});
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
