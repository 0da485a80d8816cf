// linear_residual_rms_norm (the projection that ends a block, the residual add and the next norm)
// on the CUDA backend against the CPU backend's linear then rms_norm, on fresh random inputs with
// poisoned outputs and padded rows:
// - whatever the race picks, for decode batches, a prefill-sized m past the split's limit, and a
//   bias-free shape whose k no split divides;
// - every split forced through a frozen tuning table: the norm sums the F32 partials (delta stays
//   poisoned, which shows the split ran), within BF16 tolerance of the plain GEMM's result;
// - a captured graph of the split replays the eager result bit for bit.
// Skips without a GPU or cuBLASLt.
#ifdef FLARE_HAVE_CUDA

#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpu_support.h"
#include "helios/cuda/cublaslt.h"
#include "helios/cuda/gemm_runner.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

struct Shape {
  std::int64_t m, n, k;
};

class CudaResidualNorm : public BackendVersusCpuTest {
 protected:
  // Both backends' operands for one shape: x [m, k] (GPU rows padded), w [n, k], a residual and a
  // norm weight; the GPU's delta and out poisoned.
  struct Operands {
    Matrix cx, cw, cres, cnw, cdelta, cout;
    Matrix gx, gw, gres, gnw, gdelta, gout;
  };
  Operands make(const Shape& s) {
    Operands o;
    const auto x = random_bf16(std::size_t(s.m * s.k), 1.0f), w = random_bf16(std::size_t(s.n * s.k), 0.05f);
    const auto res = random_bf16(std::size_t(s.m * s.n), 1.0f);
    const auto nw = random_f32(std::size_t(s.n), 0.5f, 1.5f);
    o.cx = host_f32(cpu_, x, s.m, s.k);
    o.cw = host_bf16(w, s.n, s.k);
    o.cres = host_f32(cpu_, res, s.m, s.n);
    o.cnw = host_f32_values(nw, 1, s.n);
    o.cdelta = host_f32(cpu_, {}, s.m, s.n);
    o.cout = host_f32(cpu_, {}, s.m, s.n);
    o.gx = device_bf16(*gpu_, x, s.m, s.k, s.k + 8);
    o.gw = device_bf16(*gpu_, w, s.n, s.k, s.k);
    o.gres = device_bf16(*gpu_, res, s.m, s.n, s.n + 8);
    o.gnw = device_f32(*gpu_, nw, 1, s.n);
    o.gdelta = device_bf16(*gpu_, {}, s.m, s.n, s.n);
    o.gout = device_bf16(*gpu_, {}, s.m, s.n, s.n + 16);
    return o;
  }
  void run_cpu(Operands& o) {
    cpu_.linear_residual_rms_norm(o.cx.t, o.cw.t, o.cdelta.t, o.cres.t, o.cnw.t, 1e-5f, o.cout.t);
  }
  void run_gpu(Operands& o) {
    gpu_->linear_residual_rms_norm(o.gx.t, o.gw.t, o.gdelta.t, o.gres.t, o.gnw.t, 1e-5f, o.gout.t);
  }
  void expect_matches_cpu(const std::string& label, Operands& o) {
    expect_close(label + " out", device_values(*gpu_, o.gout), host_values(o.cout), 2e-2f, 2e-2f);
    expect_close(label + " residual", device_values(*gpu_, o.gres), host_values(o.cres), 2e-2f, 1e-2f);
  }
  cuda::GemmOperands operands_of(const Operands& o) const {
    return {.x = CUdeviceptr(o.gx.t.data),
            .x_stride = o.gx.t.stride,
            .w = CUdeviceptr(o.gw.t.data),
            .w_stride = o.gw.t.stride,
            .out = CUdeviceptr(o.gdelta.t.data),
            .out_stride = o.gdelta.t.stride,
            .m = o.gx.t.rows,
            .n = o.gw.t.rows,
            .k = o.gw.t.cols};
  }
};

TEST_F(CudaResidualNorm, MatchesTheCpuWhateverTheRacePicks) {
  for (const Shape& s : std::vector<Shape>{{1, 512, 1536}, {16, 1024, 3072}, {64, 1024, 3072}, {128, 512, 1536},
                                           {200, 512, 1536}, {64, 512, 1544}}) {
    const std::string label = fmt::format("m {} n {} k {}", s.m, s.n, s.k);
    Operands o = make(s);
    run_cpu(o);
    run_gpu(o);
    expect_matches_cpu(label, o);
  }
}

TEST_F(CudaResidualNorm, EverySplitSumsItsPartials) {
  cuda::CublasLt lt(cuda::k_default_cuda_root);
  cuda::GemmRunner runner(lt, gpu_->device().arch(), gpu_->stream());
  const std::vector<Shape> shapes{{1, 512, 4608}, {8, 1024, 4608}, {64, 1024, 4608}, {128, 512, 4608}, {4, 8192, 4608}};
  for (const Shape& s : shapes) {
    for (const std::uint8_t parts : k_split_partials_parts) {
      const std::string label = fmt::format("m {} n {} k {} split {}", s.m, s.n, s.k, parts);
      Operands o = make(s);
      const std::optional<GemmChoice> choice = runner.first_split_choice(operands_of(o), parts);
      ASSERT_TRUE(choice.has_value()) << label << ": cuBLASLt has no batched GEMM for it";
      GemmTuning table;
      table.insert({GemmTuning::bucket_m(s.m), s.n, s.k, DType::bf16, DType::bf16, false, GemmFusion::residual_norm,
                    gpu_->device().arch(),
                    lt.version()},
                   *choice);
      GemmTuning frozen = GemmTuning::parse(table.serialize());
      frozen.set_frozen(true);
      gpu_->install_gemm_tuning(std::move(frozen));
      run_cpu(o);
      run_gpu(o);
      expect_matches_cpu(label, o);
      const std::vector<float> delta = device_values(*gpu_, o.gdelta);
      EXPECT_TRUE(std::isnan(delta[0]) && std::isnan(delta.back())) << label << ": delta was written, so no split ran";
      EXPECT_EQ(gpu_->gemm_tuning().n_timed(), 0);
    }
  }
  gpu_->install_gemm_tuning(GemmTuning{});
}

TEST_F(CudaResidualNorm, ACapturedSplitReplaysTheEagerBits) {
  const Shape s{32, 1024, 4096};
  cuda::CublasLt lt(cuda::k_default_cuda_root);
  cuda::GemmRunner runner(lt, gpu_->device().arch(), gpu_->stream());
  Operands o = make(s);
  const std::optional<GemmChoice> choice = runner.first_split_choice(operands_of(o), 4);
  ASSERT_TRUE(choice.has_value());
  GemmTuning table;
  table.insert({32, s.n, s.k, DType::bf16, DType::bf16, false, GemmFusion::residual_norm, gpu_->device().arch(),
                lt.version()},
               *choice);
  table.set_frozen(true);
  gpu_->install_gemm_tuning(std::move(table));
  const std::vector<float> residual_before = device_values(*gpu_, o.gres);
  run_gpu(o);  // eager: sizes the partials
  const std::vector<float> eager_out = device_values(*gpu_, o.gout), eager_res = device_values(*gpu_, o.gres);
  // Back to the first residual, then the same operation from a graph.
  std::vector<std::uint16_t> bits(residual_before.size());
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = f32_to_bf16(residual_before[i]);
  o.gres = device_bf16(*gpu_, bits, s.m, s.n, s.n + 8);
  const auto graph = gpu_->capture([&] { run_gpu(o); });
  gpu_->replay(*graph);
  EXPECT_EQ(device_values(*gpu_, o.gout), eager_out);
  EXPECT_EQ(device_values(*gpu_, o.gres), eager_res);
  gpu_->install_gemm_tuning(GemmTuning{});
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
