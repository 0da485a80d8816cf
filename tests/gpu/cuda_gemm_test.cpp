// cuBLASLt GEMMs of the CUDA backend: linear() against the CPU backend on model shapes (decode m 1
// and 3, odd m 17 and 200, m 64; Llama-8B projections and an odd small one), with and without bias,
// BF16 and F32 outputs, strided x and padded outputs (poisoned, so unwritten or overwritten elements
// show); the GemmRunner directly (which problems cuBLASLt takes, where the bias goes); tuning: a
// race is counted, saved beside the kernel cache, reused by a second backend without timing,
// serialized, parsed into a frozen table that runs with n_timed() == 0; untuned shapes inside a
// graph capture (no timing, correct replay). Prints achieved TFLOP/s of
// 2048 x 4096 x 14336 GEMMs and the decode GEMMs' weight bandwidth (informational, not asserted).
#ifdef FLARE_HAVE_CUDA

#include <cstring>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "common/error.h"
#include "gpu_support.h"
#include "helios/cpu/cpu_backend.h"
#include "helios/cuda/cublaslt.h"
#include "helios/cuda/gemm_runner.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

class CudaGemm : public testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    gpu_ = try_cuda_backend(&reason);
    if (!gpu_) GTEST_SKIP() << "no CUDA backend: " << reason;
    ASSERT_EQ(gpu_->gemm_engine_name(), "cublaslt") << "cuBLASLt did not load: " << cublaslt_reason();
    const std::uint32_t seed = std::random_device{}();
    rng_.seed(seed);
    std::printf("[ device   ] %s (%s), seed %u, GEMM engine %s\n", gpu_->device().name.c_str(),
                gpu_->device().arch().c_str(), seed, std::string(gpu_->gemm_engine_name()).c_str());
  }

  static std::string cublaslt_reason() {
    std::string reason;
    cuda::CublasLt::try_load(cuda::k_default_cuda_root, &reason);
    return reason;
  }

  // Values spread like activations (x) or weights (w); cheap enough for 60M-element matrices.
  std::vector<std::uint16_t> random_bf16(std::size_t n, float scale) {
    std::uniform_real_distribution<float> uniform(-scale, scale);
    std::vector<std::uint16_t> v(n);
    for (auto& x : v) x = f32_to_bf16(uniform(rng_));
    return v;
  }

  struct Case {
    std::int64_t m, n, k;
    bool bias, f32_out;
    std::int64_t x_pad, out_pad;  // row padding of x and of a bf16 output
  };

  // Runs linear() of `c` on the GPU and the CPU and compares; returns the GPU output.
  std::vector<float> check_linear(const Case& c, cuda::CudaBackend& gpu, const std::string& tag = "") {
    const auto x = random_bf16(std::size_t(c.m * c.k), 1.0f);
    const auto w = random_bf16(std::size_t(c.n * c.k), 0.05f);
    std::vector<float> bias(std::size_t(c.n));
    for (auto& b : bias) b = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng_);
    Matrix cx = host_f32(cpu_, x, c.m, c.k), cout = host_f32(cpu_, {}, c.m, c.n);
    Matrix cw{cpu_.allocate(w.size() * 2), {}};
    std::memcpy(cw.buffer->data(), w.data(), w.size() * 2);
    cw.t = Tensor::of(*cw.buffer, DType::bf16, c.n, c.k);
    Matrix cb{cpu_.allocate(bias.size() * 4), {}};
    std::memcpy(cb.buffer->data(), bias.data(), bias.size() * 4);
    cb.t = Tensor::of(*cb.buffer, DType::f32, 1, c.n);
    cpu_.linear(cx.t, cw.t, c.bias ? &cb.t : nullptr, cout.t);

    Matrix gx = device_bf16(gpu, x, c.m, c.k, c.k + c.x_pad), gw = device_bf16(gpu, w, c.n, c.k, c.k);
    Matrix gb = device_f32(gpu, bias, 1, c.n);
    Matrix gout = c.f32_out ? device_f32(gpu, {}, c.m, c.n) : device_bf16(gpu, {}, c.m, c.n, c.n + c.out_pad);
    gpu.linear(gx.t, gw.t, c.bias ? &gb.t : nullptr, gout.t);
    const std::string label = fmt::format("{}[{}, {}] x [{}, {}]^T{} -> {} (x pad {}, out pad {})", tag, c.m, c.k, c.n,
                                          c.k, c.bias ? " + bias" : "", c.f32_out ? "f32" : "bf16", c.x_pad, c.out_pad);
    std::vector<float> got = device_values(gpu, gout);
    // F32 outputs differ from the CPU only by summation order; BF16 outputs also by one rounding.
    expect_close(label, got, host_values(cout), c.f32_out ? 2e-3f : 2e-2f, c.f32_out ? 1e-3f : 1.6e-2f);
    return got;
  }

  std::unique_ptr<cuda::CudaBackend> gpu_;  // declared first: its buffers below go before it
  cpu::CpuBackend cpu_{8};
  std::mt19937 rng_;
};

TEST_F(CudaGemm, LinearMatchesCpuOnModelShapes) {
  struct Nk {
    std::int64_t n, k;
  };
  int i = 0;
  for (const std::int64_t m : {1, 3, 17, 64, 200}) {
    for (const Nk nk : {Nk{4096, 4096}, Nk{6144, 4096}, Nk{100, 72}}) {
      for (const bool bias : {false, true}) {
        for (const bool f32_out : {false, true}) {
          // Row padding: aligned (8 elements), or odd (rows only 2-byte aligned) every third case.
          const std::int64_t pad = ++i % 3 == 0 ? 5 : 8;
          check_linear({m, nk.n, nk.k, bias, f32_out, pad, pad == 5 ? 3 : 8}, *gpu_);
        }
      }
    }
  }
  // The widest projection (Llama-8B gate_up) at decode and small-batch m.
  check_linear({1, 28672, 4096, false, false, 8, 8}, *gpu_);
  check_linear({17, 28672, 4096, true, false, 0, 0}, *gpu_);
}

TEST_F(CudaGemm, RunnerTakesAlignedProblemsAndReportsWhereTheBiasGoes) {
  cuda::CublasLt lt(cuda::k_default_cuda_root);
  cuda::GemmRunner runner(lt, gpu_->device().arch(), gpu_->stream());
  std::printf("[ cublaslt ] %s version %llu\n", lt.library_path().c_str(), (unsigned long long)lt.version());
  GemmTuning tuning;
  tuning.set_effort(TuneEffort::off);
  for (const DType out : {DType::bf16, DType::f32}) {
    for (const std::int64_t stride_pad : {0, 5}) {
      const std::int64_t m = 17, n = 256, k = 128;
      Matrix x = device_bf16(*gpu_, random_bf16(std::size_t(m * k), 1.0f), m, k, k + stride_pad);
      Matrix w = device_bf16(*gpu_, random_bf16(std::size_t(n * k), 0.1f), n, k, k);
      Matrix b = device_f32(*gpu_, std::vector<float>(std::size_t(n), 0.5f), 1, n);
      Matrix o = out == DType::f32 ? device_f32(*gpu_, {}, m, n) : device_bf16(*gpu_, {}, m, n, n);
      const cuda::GemmOperands op{.x = CUdeviceptr(x.t.data), .x_stride = x.t.stride, .w = CUdeviceptr(w.t.data),
                                  .w_stride = w.t.stride, .bias = CUdeviceptr(b.t.data), .out = CUdeviceptr(o.t.data),
                                  .out_stride = o.t.stride, .out_dtype = out, .m = m, .n = n, .k = k};
      const cuda::GemmResult r = runner.run(op, tuning);
      const char* name = r == cuda::GemmResult::done           ? "bias in the epilogue"
                         : r == cuda::GemmResult::bias_pending ? "bias by the add kernel"
                                                               : "unsupported (NVRTC kernel)";
      std::printf("[ runner   ] out %s, x stride %lld: %s\n", std::string(dtype_name(out)).c_str(),
                  (long long)x.t.stride, name);
      if (stride_pad == 0) {
        EXPECT_NE(r, cuda::GemmResult::unsupported) << "aligned problems must run on cuBLASLt";
      }
      gpu_->synchronize();
    }
  }
  EXPECT_EQ(tuning.n_timed(), 0) << "effort off times nothing";
  EXPECT_EQ(tuning.size(), 0u);
}

TEST_F(CudaGemm, TunesOnceSavesSerializesAndReplaysFrozen) {
  // Shapes no other test of this process uses, so their first use here is their first anywhere.
  const Case tuned_case{17, 1536, 2048, true, false, 8, 8};
  const std::string arch = gpu_->device().arch();
  const std::uint64_t version = cuda::CublasLt(cuda::k_default_cuda_root).version();
  const GemmShapeKey key_bias{32, 1536, 2048, DType::bf16, DType::bf16, true, GemmFusion::none, arch, version};
  const GemmShapeKey key_f32{1, 1536, 2048, DType::f32, DType::bf16, false, GemmFusion::none, arch, version};
  const std::int64_t n0 = gpu_->gemm_tuning().n_timed();
  check_linear(tuned_case, *gpu_, "tune ");
  EXPECT_EQ(gpu_->gemm_tuning().n_timed(), n0 + 1) << "the first use of a shape races its candidates";
  check_linear({20, 1536, 2048, true, false, 8, 8}, *gpu_, "same bucket ");
  EXPECT_EQ(gpu_->gemm_tuning().n_timed(), n0 + 1) << "m 20 shares m 17's bucket (32): no second race";
  check_linear({1, 1536, 2048, false, true, 0, 0}, *gpu_, "tune ");
  EXPECT_EQ(gpu_->gemm_tuning().n_timed(), n0 + 2);
  for (const GemmShapeKey& key : {key_bias, key_f32}) {
    const GemmChoice* choice = gpu_->gemm_tuning().find(key);
    ASSERT_NE(choice, nullptr) << "m<=" << key.m_bucket;
    std::printf("[ tuned    ] m<=%lld n %lld k %lld %s%s: %.2f us, best of %u candidates\n", (long long)key.m_bucket,
                (long long)key.n, (long long)key.k, std::string(dtype_name(key.out)).c_str(),
                key.bias ? " + bias" : "", choice->time_us, unsigned(choice->n_candidates));
    EXPECT_GT(choice->n_candidates, 0u);
    EXPECT_GT(choice->time_us, 0.0f);
  }
  const std::string bytes = gpu_->gemm_tuning().serialize();

  // A second backend on the same kernel cache starts with the saved races and times nothing.
  auto second = std::make_unique<cuda::CudaBackend>(0, kernel_cache_dir());
  for (const GemmShapeKey& key : {key_bias, key_f32}) {
    ASSERT_NE(second->gemm_tuning().find(key), nullptr) << "the races were saved beside the kernel cache";
    EXPECT_EQ(second->gemm_tuning().find(key)->algo, gpu_->gemm_tuning().find(key)->algo);
  }
  check_linear(tuned_case, *second, "reloaded ");
  EXPECT_EQ(second->gemm_tuning().n_timed(), 0);

  // A package's table, frozen: known shapes use their winners, new shapes the heuristic; no timing.
  GemmTuning frozen = GemmTuning::parse(bytes);
  frozen.set_frozen(true);
  const std::size_t n_entries = frozen.size();
  second->install_gemm_tuning(std::move(frozen));
  check_linear(tuned_case, *second, "frozen ");
  check_linear({64, 1536, 1024, false, false, 8, 8}, *second, "frozen, untuned ");
  check_linear({3, 100, 40, true, true, 5, 3}, *second, "frozen, untuned ");
  EXPECT_EQ(second->gemm_tuning().n_timed(), 0) << "a frozen table never times";
  EXPECT_EQ(second->gemm_tuning().size(), n_entries) << "a frozen table never grows";

  // Efforts keep separate saved tables: audit races the shape default already chose; off races nothing.
  second->set_gemm_effort(TuneEffort::audit);
  check_linear(tuned_case, *second, "audit ");
  EXPECT_EQ(second->gemm_tuning().n_timed(), 1);
  ASSERT_NE(second->gemm_tuning().find(key_bias), nullptr);
  EXPECT_GE(second->gemm_tuning().find(key_bias)->n_candidates, gpu_->gemm_tuning().find(key_bias)->n_candidates);
  second->set_gemm_effort(TuneEffort::off);
  check_linear(tuned_case, *second, "effort off ");
  EXPECT_EQ(second->gemm_tuning().n_timed(), 0);
  EXPECT_EQ(second->gemm_tuning().size(), 0u);
}

// linear() of shapes never seen before, inside a stream capture: no race may run (it would
// synchronize and break the capture), and the replayed graph computes the right values.
TEST_F(CudaGemm, UntunedShapesRunInsideAGraphCapture) {
  const cuda::Driver& d = cuda::driver();
  const std::int64_t before = gpu_->gemm_tuning().n_timed();
  struct Io {
    Case c;
    Matrix x, w, b, out;
    std::vector<float> expected;
  };
  std::vector<Io> ios;
  for (const Case& c : {Case{5, 384, 256, true, false, 8, 8}, Case{5, 384, 256, true, true, 8, 0},
                        Case{9, 640, 320, false, false, 0, 0}}) {
    const auto x = random_bf16(std::size_t(c.m * c.k), 1.0f), w = random_bf16(std::size_t(c.n * c.k), 0.05f);
    const std::vector<float> bias(std::size_t(c.n), 0.25f);
    Io io{c, device_bf16(*gpu_, x, c.m, c.k, c.k + c.x_pad), device_bf16(*gpu_, w, c.n, c.k, c.k),
          device_f32(*gpu_, bias, 1, c.n),
          c.f32_out ? device_f32(*gpu_, {}, c.m, c.n) : device_bf16(*gpu_, {}, c.m, c.n, c.n + c.out_pad), {}};
    Matrix cx = host_f32(cpu_, x, c.m, c.k), cw = host_f32(cpu_, w, c.n, c.k), cout = host_f32(cpu_, {}, c.m, c.n);
    for (std::int64_t i = 0; i < c.m; ++i) {  // host reference in double
      for (std::int64_t j = 0; j < c.n; ++j) {
        double acc = c.bias ? 0.25 : 0.0;
        for (std::int64_t l = 0; l < c.k; ++l) {
          acc += double(static_cast<float*>(cx.t.data)[i * c.k + l]) * double(static_cast<float*>(cw.t.data)[j * c.k + l]);
        }
        io.expected.push_back(float(acc));
      }
    }
    ios.push_back(std::move(io));
  }
  gpu_->synchronize();
  cuda::check(d.stream_begin_capture(gpu_->stream().handle(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
              "cuStreamBeginCapture");
  try {
    for (Io& io : ios) gpu_->linear(io.x.t, io.w.t, io.c.bias ? &io.b.t : nullptr, io.out.t);
  } catch (...) {
    CUgraph discarded = nullptr;
    d.stream_end_capture(gpu_->stream().handle(), &discarded);
    if (discarded) d.graph_destroy(discarded);
    throw;
  }
  CUgraph graph = nullptr;
  cuda::check(d.stream_end_capture(gpu_->stream().handle(), &graph), "cuStreamEndCapture");
  CUgraphExec exec = nullptr;
  cuda::check(d.graph_instantiate(&exec, graph, 0), "cuGraphInstantiate");
  cuda::check(d.graph_launch(exec, gpu_->stream().handle()), "cuGraphLaunch");
  gpu_->synchronize();
  d.graph_exec_destroy(exec);
  d.graph_destroy(graph);
  EXPECT_EQ(gpu_->gemm_tuning().n_timed(), before) << "nothing is timed inside a capture";
  for (const Io& io : ios) {
    expect_close(fmt::format("graph [{}, {}] x [{}, {}]^T{} -> {}", io.c.m, io.c.k, io.c.n, io.c.k,
                             io.c.bias ? " + bias" : "", io.c.f32_out ? "f32" : "bf16"),
                 device_values(*gpu_, io.out), io.expected, io.c.f32_out ? 1e-3f : 2e-2f, io.c.f32_out ? 1e-3f : 1.6e-2f);
  }
}

TEST_F(CudaGemm, ThroughputOfLargeAndDecodeGemms) {
  struct Shape {
    std::int64_t m, n, k;
    const char* what;
  };
  for (const Shape s : {Shape{2048, 14336, 4096, "2048 x 4096 x 14336 (gate/up half)"},
                        Shape{2048, 4096, 14336, "2048 x 14336 x 4096 (down)"},
                        Shape{1, 6144, 4096, "decode qkv"}, Shape{1, 4096, 4096, "decode o"},
                        Shape{1, 28672, 4096, "decode gate_up"}, Shape{1, 4096, 14336, "decode down"}}) {
    Matrix x = device_bf16(*gpu_, random_bf16(std::size_t(s.m * s.k), 1.0f), s.m, s.k, s.k);
    Matrix w = device_bf16(*gpu_, random_bf16(std::size_t(s.n * s.k), 0.05f), s.n, s.k, s.k);
    Matrix o = device_bf16(*gpu_, {}, s.m, s.n, s.n);
    // Heuristic, tuned, heuristic again: the repeat shows how much clocks drifted meanwhile.
    std::string line;
    for (const TuneEffort effort : {TuneEffort::off, TuneEffort::normal, TuneEffort::off}) {
      GemmTuning t;
      t.set_effort(effort);
      gpu_->install_gemm_tuning(std::move(t));
      const float ms = stream_time_ms(*gpu_, [&] { gpu_->linear(x.t, w.t, nullptr, o.t); }, s.m == 1 ? 200 : 20);
      const double tflops = 2.0 * double(s.m) * double(s.n) * double(s.k) / (double(ms) * 1e9);
      const double weight_gbps = double(s.n * s.k * 2) / (double(ms) * 1e6);
      line += fmt::format("  {}: {:.1f} us {:.0f} TFLOP/s {:.0f} GB/s", effort == TuneEffort::off ? "heuristic" : "tuned",
                          ms * 1000.0f, tflops, weight_gbps);
    }
    std::printf("[ gemm     ] %-36s%s\n", s.what, line.c_str());
  }
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
