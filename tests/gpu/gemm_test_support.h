// Shared by the GEMM kernel tests (skinny, stream): random BF16 operands, outputs whose row padding
// is poisoned and checked, the CPU backend's result from host copies of strided inputs, and the
// tolerance against it.
#pragma once

#ifdef FLARE_HAVE_CUDA

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <gtest/gtest.h>

#include "gpu_support.h"
#include "helios/cuda/cublaslt.h"
#include "helios/cuda/kernel_sources.h"
#include "helios/cuda/nvrtc.h"
#include "helios/cuda/gemm_runner.h"
#include "helios/cuda/stream_gemm.h"

namespace flare::helios::gpu_testing {

// Within tolerance of the CPU: F32 outputs differ only by summation order, BF16 also by one rounding.
inline bool within_tolerance(const std::vector<float>& got, const std::vector<float>& ref, bool f32, double* max_abs) {
  const float atol = f32 ? 2e-3f : 2e-2f, rtol = f32 ? 1e-3f : 1.6e-2f;
  bool ok = got.size() == ref.size();
  for (std::size_t i = 0; ok && i < got.size(); ++i) {
    const double d = std::fabs(double(got[i]) - double(ref[i]));
    if (!std::isfinite(got[i]) || d > atol + rtol * std::fabs(ref[i])) ok = false;
    *max_abs = std::max(*max_abs, d);
  }
  return ok;
}

class GemmVersusCpuTest : public BackendVersusCpuTest {
 protected:
  // Compiles kernel source `source` once per tile (define `define`=tile) for `arch` through the
  // backend's kernel cache (so these are the modules the backend built) into modules_.
  template <std::size_t N>
  void load_tile_modules(const char* source, const char* define, const std::array<int, N>& tiles,
                         const std::string& arch) {
    cuda::Nvrtc nvrtc(cuda::k_default_cuda_root);
    for (const int tile : tiles) {
      cuda::CompileOptions options;
      options.arch = arch;
      options.defines = {{define, std::to_string(tile)}};
      modules_[tile] = std::make_unique<cuda::Module>(
          source, nvrtc.compile_cached(gpu_->kernel_cache(), cuda::embedded_kernel(source), options));
    }
  }
  CUfunction tile_function(const std::string& entry, int tile) const { return modules_.at(tile)->function(entry.c_str()); }

  std::map<int, std::unique_ptr<cuda::Module>> modules_;  // by tile

  std::vector<std::uint16_t> uniform_bf16(std::size_t n, float scale) {  // uniform in [-scale, scale)
    std::uniform_real_distribution<float> uniform(-scale, scale);
    std::vector<std::uint16_t> v(n);
    for (auto& x : v) x = f32_to_bf16(uniform(rng_));
    return v;
  }

  // An output [m, n] of `dtype` with row stride `stride`, every element poisoned (bf16 quiet NaN, f32 NaN).
  Matrix poisoned_out(DType dtype, std::int64_t m, std::int64_t n, std::int64_t stride) {
    const std::size_t count = std::size_t(m * stride);
    Matrix o{gpu_->allocate(count * dtype_size_bytes(dtype)), {}};
    if (dtype == DType::f32) {
      const std::vector<float> nan(count, std::nanf(""));
      gpu_->upload(*o.buffer, 0, nan.data(), count * 4);
    } else {
      const std::vector<std::uint16_t> nan(count, k_poison_bf16);
      gpu_->upload(*o.buffer, 0, nan.data(), count * 2);
    }
    o.t = Tensor{o.buffer->data(), dtype, m, n, stride};
    return o;
  }

  // The output's [m, n] values; fails the test where padding lost its poison.
  std::vector<float> out_values(const Matrix& o, const std::string& what) {
    const std::size_t count = std::size_t(o.t.rows * o.t.stride);
    std::vector<float> raw(count);
    if (o.t.dtype == DType::f32) {
      gpu_->download(*o.buffer, 0, raw.data(), count * 4);
    } else {
      std::vector<std::uint16_t> bits(count);
      gpu_->download(*o.buffer, 0, bits.data(), count * 2);
      for (std::size_t i = 0; i < count; ++i) raw[i] = bits[i] == k_poison_bf16 ? std::nanf("") : bf16_to_f32(bits[i]);
    }
    std::vector<float> values;
    std::size_t n_padding_written = 0;
    for (std::int64_t r = 0; r < o.t.rows; ++r) {
      for (std::int64_t c = 0; c < o.t.stride; ++c) {
        const float v = raw[std::size_t(r * o.t.stride + c)];
        if (c < o.t.cols) values.push_back(v);
        else if (!std::isnan(v)) ++n_padding_written;
      }
    }
    EXPECT_EQ(n_padding_written, 0u) << what << ": row padding was written";
    return values;
  }

  // The CPU backend's F32 result of x[:m, :k] @ w[:n, :k]^T (+ bias[:n]) from host copies of the
  // strided device inputs.
  std::vector<float> cpu_reference(const std::vector<std::uint16_t>& x, std::int64_t x_stride,
                                   const std::vector<std::uint16_t>& w, std::int64_t w_stride,
                                   const std::vector<float>* bias, std::int64_t m, std::int64_t n, std::int64_t k) {
    std::vector<std::uint16_t> x_dense(std::size_t(m * k)), w_dense(std::size_t(n * k));
    for (std::int64_t r = 0; r < m; ++r) std::copy_n(x.begin() + r * x_stride, k, x_dense.begin() + r * k);
    for (std::int64_t r = 0; r < n; ++r) std::copy_n(w.begin() + r * w_stride, k, w_dense.begin() + r * k);
    Matrix cx = host_f32(cpu_, x_dense, m, k), cout = host_f32(cpu_, {}, m, n);
    Matrix cw{cpu_.allocate(w_dense.size() * 2), {}};
    std::memcpy(cw.buffer->data(), w_dense.data(), w_dense.size() * 2);
    cw.t = Tensor::of(*cw.buffer, DType::bf16, n, k);
    Matrix cb{cpu_.allocate(std::size_t(n) * 4), {}};
    if (bias) std::memcpy(cb.buffer->data(), bias->data(), std::size_t(n) * 4);
    cb.t = Tensor::of(*cb.buffer, DType::f32, 1, n);
    cpu_.linear(cx.t, cw.t, bias ? &cb.t : nullptr, cout.t);
    return host_values(cout);
  }

  // A package's frozen table naming `choice` for [m, k] x [n, k]^T + bias (strided x): the backend's
  // linear() runs it for BF16 and F32 outputs, eagerly and inside a graph capture, matches the CPU,
  // replays the same bits, and times nothing.
  void expect_frozen_choice_runs_through_the_backend(std::int64_t m, std::int64_t n, std::int64_t k, GemmChoice choice,
                                                     const std::string& label) {
    const cuda::CublasLt lt(cuda::k_default_cuda_root);
    const auto x = uniform_bf16(std::size_t(m * k), 1.0f), w = uniform_bf16(std::size_t(n * k), 0.05f);
    std::vector<float> bias(static_cast<std::size_t>(n));
    for (auto& b : bias) b = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng_);
    const Matrix gx = device_bf16(*gpu_, x, m, k, k + 8), gw = device_bf16(*gpu_, w, n, k, k);
    const Matrix gb = device_f32(*gpu_, bias, 1, n);
    const std::vector<float> ref = cpu_reference(x, k, w, k, &bias, m, n, k);
    choice.time_us = 1.0f;
    choice.n_candidates = 1;
    GemmTuning table;
    for (const DType out : {DType::bf16, DType::f32}) {
      table.insert({GemmTuning::bucket_m(m), n, k, out, DType::bf16, true, GemmFusion::none, gpu_->device().arch(),
                    lt.version()},
                   choice);
    }
    GemmTuning frozen = GemmTuning::parse(table.serialize());
    frozen.set_frozen(true);
    gpu_->install_gemm_tuning(std::move(frozen));
    for (const DType out : {DType::bf16, DType::f32}) {
      const Matrix o = poisoned_out(out, m, n, n + 5);
      gpu_->linear(gx.t, gw.t, &gb.t, o.t);
      const std::string what = "linear " + label + " -> " + std::string(dtype_name(out));
      const std::vector<float> eager = out_values(o, what);
      double max_abs = 0.0;
      EXPECT_TRUE(within_tolerance(eager, ref, out == DType::f32, &max_abs)) << what << ": " << max_abs;

      const Matrix g = poisoned_out(out, m, n, n + 5);
      auto graph = gpu_->capture([&] { gpu_->linear(gx.t, gw.t, &gb.t, g.t); });
      ASSERT_NE(graph, nullptr);
      gpu_->replay(*graph);
      gpu_->synchronize();
      EXPECT_EQ(out_values(g, what + " (graph)"), eager) << what;
    }
    EXPECT_EQ(gpu_->gemm_tuning().n_timed(), 0);
  }

  // Runs one kernel variant on a problem: false when the variant does not take it (skipped), else
  // it has enqueued the GEMM on the backend's stream.
  using VariantRun = std::function<bool(const cuda::GemmOperands& op, int variant)>;

  // Every problem of ms x ns x ks (top-left corners of one x [ms.back(), 4120-stride] and one w
  // [ns.back(), 4112-stride], rows 16-byte aligned and wider than k; a bias on every other shape),
  // with BF16 and F32 outputs whose padding is poisoned, through `run` for each of n_variants
  // variants, each result against the CPU. Prints the largest error over the variants for the
  // widest n at k >= 4096; returns how many runs were compared.
  int compare_every_variant_with_the_cpu(std::initializer_list<std::int64_t> ms, std::initializer_list<std::int64_t> ns,
                                         std::initializer_list<std::int64_t> ks, int n_variants,
                                         const std::function<std::string(int)>& variant_name, const VariantRun& run) {
    constexpr std::int64_t x_stride = 4120, w_stride = 4112;
    const std::int64_t max_m = *std::max_element(ms.begin(), ms.end());
    const std::int64_t max_n = *std::max_element(ns.begin(), ns.end());
    const auto x = uniform_bf16(std::size_t(max_m * x_stride), 1.0f);
    const auto w = uniform_bf16(std::size_t(max_n * w_stride), 0.05f);
    std::vector<float> bias(static_cast<std::size_t>(max_n));
    for (auto& b : bias) b = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng_);
    const Matrix gx = device_bf16(*gpu_, x, max_m, x_stride, x_stride);
    const Matrix gw = device_bf16(*gpu_, w, max_n, w_stride, w_stride);
    const Matrix gb = device_f32(*gpu_, bias, 1, max_n);
    int i = 0, n_runs = 0;
    for (const std::int64_t m : ms) {
      for (const std::int64_t n : ns) {
        for (const std::int64_t k : ks) {
          const bool with_bias = ++i % 2 == 0;
          const std::vector<float> ref = cpu_reference(x, x_stride, w, w_stride, with_bias ? &bias : nullptr, m, n, k);
          const Matrix xs{nullptr, Tensor{gx.t.data, DType::bf16, m, k, x_stride}};
          const Matrix ws{nullptr, Tensor{gw.t.data, DType::bf16, n, k, w_stride}};
          for (const DType out : {DType::bf16, DType::f32}) {
            double max_abs = 0.0;
            for (int v = 0; v < n_variants; ++v) {
              const Matrix o = poisoned_out(out, m, n, n + (out == DType::f32 ? 2 : 3));
              if (!run(operands(xs, ws, with_bias ? &gb : nullptr, o), v)) continue;
              const std::string what = fmt::format("[{}, {}] x [{}, {}]^T{} -> {} {}", m, k, n, k,
                                                   with_bias ? " + bias" : "", dtype_name(out), variant_name(v));
              const std::vector<float> got = out_values(o, what);
              double case_abs = 0.0;
              EXPECT_TRUE(within_tolerance(got, ref, out == DType::f32, &case_abs)) << what << ": max abs error " << case_abs;
              max_abs = std::max(max_abs, case_abs);
              ++n_runs;
            }
            if (n == max_n && k >= 4096) {
              std::printf("[ error    ] [%3lld, %lld] x [%lld, %lld]^T%s -> %s, all variants: max_abs=%.3e\n",
                          (long long)m, (long long)k, (long long)n, (long long)k, with_bias ? " + bias" : "",
                          std::string(dtype_name(out)).c_str(), max_abs);
            }
          }
        }
      }
    }
    return n_runs;
  }

  cuda::GemmOperands operands(const Matrix& x, const Matrix& w, const Matrix* bias, const Matrix& out) const {
    return {.x = CUdeviceptr(x.t.data), .x_stride = x.t.stride, .w = CUdeviceptr(w.t.data), .w_stride = w.t.stride,
            .bias = bias ? CUdeviceptr(bias->t.data) : 0, .out = CUdeviceptr(out.t.data), .out_stride = out.t.stride,
            .out_dtype = out.t.dtype, .m = x.t.rows, .n = w.t.rows, .k = w.t.cols};
  }

};

// The streaming GEMM's tests: its modules built by the test for sm_90a, and a StreamGemm over them
// (no dependent launch); skipped on other GPUs.
class StreamGemmVersusCpuTest : public GemmVersusCpuTest {
 protected:
  void SetUp() override {
    GemmVersusCpuTest::SetUp();
    if (!gpu_) return;  // skipped
    if (!cuda::StreamGemm::available(gpu_->device())) GTEST_SKIP() << "the stream GEMM runs on sm_90 only";
    load_tile_modules(cuda::k_stream_gemm_source, "STREAM_N", cuda::StreamGemm::k_tiles, gpu_->device().arch() + "a");
    stream_ = make_stream();
  }

  std::unique_ptr<cuda::StreamGemm> make_stream() {
    return std::make_unique<cuda::StreamGemm>(
        [this](const std::string& entry, int tile) { return tile_function(entry, tile); }, false);
  }

  std::unique_ptr<cuda::StreamGemm> stream_;
};

}  // namespace flare::helios::gpu_testing

#endif  // FLARE_HAVE_CUDA
