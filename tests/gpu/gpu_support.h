// Shared pieces of the GPU tests: a CUDA backend (or the reason there is none, for GTEST_SKIP),
// one kernel cache folder per test process, the test data folder, and host/device matrix helpers
// that poison device outputs and row padding so unwritten or overwritten elements show.
#pragma once

#ifdef FLARE_HAVE_CUDA

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "helios/cpu/cpu_backend.h"
#include "helios/cuda/cuda_backend.h"
#include "helios/cuda/driver.h"
#include "helios/cuda/nvrtc.h"

namespace flare::helios::gpu_testing {

namespace fs = std::filesystem;

inline constexpr std::uint16_t k_poison_bf16 = 0x7fc1;  // a quiet NaN no kernel produces by rounding

// A kernel cache folder for this process, removed at exit.
inline const fs::path& kernel_cache_dir() {
  struct Dir {
    fs::path path = fs::temp_directory_path() / ("flare-gpu-backend-" + std::to_string(::getpid()));
    ~Dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

// The CUDA backend on device 0 built with `options`, or nullptr with *reason set when this machine
// cannot run one.
inline std::unique_ptr<cuda::CudaBackend> try_cuda_backend(std::string* reason,
                                                           const cuda::CudaBackendOptions& options = {}) {
  if (!cuda::driver_available(reason)) return nullptr;
  if (cuda::device_count() == 0) {
    *reason = "no CUDA device visible";
    return nullptr;
  }
  if (!cuda::Nvrtc::try_load(cuda::k_default_cuda_root, reason)) return nullptr;
  return std::make_unique<cuda::CudaBackend>(0, kernel_cache_dir(), fs::path(cuda::k_default_cuda_root), options);
}

// The test data folder: the build's, else tests/data under the current folder (a copied tree).
inline fs::path test_data_dir() {
  const fs::path built = FLARE_TEST_DATA;
  if (fs::exists(built)) return built;
  return fs::path("tests") / "data";
}

// A matrix on one backend with the buffer that holds it.
struct Matrix {
  std::unique_ptr<Buffer> buffer;
  Tensor t;
};

// rows x cols bf16 values on the device with `stride` >= cols; padding (and the values when
// `values` is empty) poisoned.
inline Matrix device_bf16(Backend& b, const std::vector<std::uint16_t>& values, std::int64_t rows, std::int64_t cols,
                          std::int64_t stride) {
  std::vector<std::uint16_t> padded(std::size_t(rows * stride), k_poison_bf16);
  for (std::int64_t r = 0; r < rows && !values.empty(); ++r) {
    std::copy_n(values.begin() + r * cols, cols, padded.begin() + r * stride);
  }
  Matrix m{b.allocate(std::max<std::size_t>(padded.size(), 1) * 2), {}};
  b.upload(*m.buffer, 0, padded.data(), padded.size() * 2);
  m.t = Tensor{m.buffer->data(), DType::bf16, rows, cols, stride};
  return m;
}

// rows x cols f32 values on the device (NaN when `values` is empty), stride = cols.
inline Matrix device_f32(Backend& b, std::vector<float> values, std::int64_t rows, std::int64_t cols) {
  if (values.empty()) values.assign(std::size_t(rows * cols), std::nanf(""));
  Matrix m{b.allocate(std::max<std::size_t>(values.size(), 1) * 4), {}};
  b.upload(*m.buffer, 0, values.data(), values.size() * 4);
  m.t = Tensor::of(*m.buffer, DType::f32, rows, cols);
  return m;
}

// The values of a device matrix as f32 (bf16 widened); ADD_FAILUREs when bf16 padding lost its poison.
inline std::vector<float> device_values(Backend& b, const Matrix& m) {
  const std::size_t n = std::size_t(m.t.rows * m.t.stride);
  std::vector<float> out;
  if (m.t.dtype == DType::f32) {
    std::vector<float> raw(n);
    b.download(*m.buffer, 0, raw.data(), n * 4);
    for (std::int64_t r = 0; r < m.t.rows; ++r) {
      out.insert(out.end(), raw.begin() + r * m.t.stride, raw.begin() + r * m.t.stride + m.t.cols);
    }
    return out;
  }
  std::vector<std::uint16_t> raw(n);
  b.download(*m.buffer, 0, raw.data(), n * 2);
  std::size_t n_padding_written = 0;
  for (std::int64_t r = 0; r < m.t.rows; ++r) {
    for (std::int64_t c = 0; c < m.t.stride; ++c) {
      const std::uint16_t bits = raw[std::size_t(r * m.t.stride + c)];
      if (c < m.t.cols) {
        out.push_back(bf16_to_f32(bits));
      } else if (bits != k_poison_bf16) {
        ++n_padding_written;
      }
    }
  }
  EXPECT_EQ(n_padding_written, 0u) << "row padding was written";
  return out;
}

// A CPU-backend f32 matrix holding bf16 values widened (or zeros when `values` is empty).
inline Matrix host_f32(Backend& cpu, const std::vector<std::uint16_t>& values, std::int64_t rows, std::int64_t cols) {
  Matrix m{cpu.allocate(std::size_t(rows * cols) * 4), {}};
  float* p = static_cast<float*>(m.buffer->data());
  for (std::size_t i = 0; i < values.size(); ++i) p[i] = bf16_to_f32(values[i]);
  m.t = Tensor::of(*m.buffer, DType::f32, rows, cols);
  return m;
}

inline std::vector<float> host_values(const Matrix& m) {
  std::vector<float> out;
  for (std::int64_t r = 0; r < m.t.rows; ++r) {
    const float* p = static_cast<const float*>(m.t.data) + r * m.t.stride;
    out.insert(out.end(), p, p + m.t.cols);
  }
  return out;
}

// Checks |gpu - ref| <= atol + rtol * |ref| everywhere (NaN fails) and prints the max errors.
inline void expect_close(const std::string& what, const std::vector<float>& gpu, const std::vector<float>& ref,
                         float atol, float rtol) {
  ASSERT_EQ(gpu.size(), ref.size()) << what;
  double max_abs = 0.0, max_rel = 0.0;
  std::size_t n_bad = 0, first_bad = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const double d = std::fabs(double(gpu[i]) - double(ref[i]));
    const bool ok = std::isfinite(gpu[i]) && d <= atol + rtol * std::fabs(ref[i]);
    if (!ok && n_bad++ == 0) first_bad = i;
    if (std::isfinite(gpu[i])) {
      max_abs = std::max(max_abs, d);
      max_rel = std::max(max_rel, d / std::max(std::fabs(double(ref[i])), 1e-6));
    }
  }
  std::printf("[ error    ] %-44s n=%zu max_abs=%.3e max_rel=%.3e\n", what.c_str(), gpu.size(), max_abs, max_rel);
  EXPECT_EQ(n_bad, 0u) << what << ": " << n_bad << " mismatches, first at " << first_bad << ": gpu " << gpu[first_bad]
                       << " vs cpu " << ref[first_bad];
}

// Mean milliseconds of `fn` over `reps` runs on `gpu`'s stream (CUDA events), after 3 warm-up runs.
inline float stream_time_ms(cuda::CudaBackend& gpu, const std::function<void()>& fn, int reps) {
  const cuda::Driver& d = cuda::driver();
  CUevent start = nullptr, end = nullptr;
  cuda::check(d.event_create(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  cuda::check(d.event_create(&end, CU_EVENT_DEFAULT), "cuEventCreate");
  for (int i = 0; i < 3; ++i) fn();
  cuda::check(d.event_record(start, gpu.stream().handle()), "cuEventRecord");
  for (int i = 0; i < reps; ++i) fn();
  cuda::check(d.event_record(end, gpu.stream().handle()), "cuEventRecord");
  cuda::check(d.event_synchronize(end), "cuEventSynchronize");
  float ms = 0.0f;
  cuda::check(d.event_elapsed_time(&ms, start, end), "cuEventElapsedTime");
  d.event_destroy(start);
  d.event_destroy(end);
  return ms / float(reps);
}

// A test of CUDA backend operations against the CPU backend (the reference) on fresh random
// inputs: SetUp skips without a GPU, seeds rng_ from std::random_device and prints the device and
// the seed, so a failure can be replayed.
class BackendVersusCpuTest : public testing::Test {
 protected:
  explicit BackendVersusCpuTest(int cpu_threads = 8) : cpu_(cpu_threads) {}

  void SetUp() override {
    std::string reason;
    gpu_ = try_cuda_backend(&reason);
    if (!gpu_) GTEST_SKIP() << "no CUDA backend: " << reason;
    const std::uint32_t seed = std::random_device{}();
    rng_.seed(seed);
    std::printf("[ device   ] %s (%s, %d SMs), seed %u\n", gpu_->device().name.c_str(), gpu_->device().arch().c_str(),
                gpu_->device().n_multiprocessors, seed);
  }

  std::vector<std::uint16_t> random_bf16(std::size_t n, float scale) {  // normal(0, scale)
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<std::uint16_t> v(n);
    for (auto& x : v) x = f32_to_bf16(normal(rng_));
    return v;
  }
  std::vector<float> random_f32(std::size_t n, float lo, float hi) {  // uniform in [lo, hi)
    std::uniform_real_distribution<float> uniform(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = uniform(rng_);
    return v;
  }
  // A CPU-backend bf16 matrix of `values` (the CPU backend's weights are bf16).
  Matrix host_bf16(const std::vector<std::uint16_t>& values, std::int64_t rows, std::int64_t cols) {
    Matrix m{cpu_.allocate(values.size() * 2), {}};
    std::memcpy(m.buffer->data(), values.data(), values.size() * 2);
    m.t = Tensor::of(*m.buffer, DType::bf16, rows, cols);
    return m;
  }
  // A CPU-backend f32 matrix of `values` as they are.
  Matrix host_f32_values(const std::vector<float>& values, std::int64_t rows, std::int64_t cols) {
    Matrix m{cpu_.allocate(values.size() * 4), {}};
    std::memcpy(m.buffer->data(), values.data(), values.size() * 4);
    m.t = Tensor::of(*m.buffer, DType::f32, rows, cols);
    return m;
  }

  std::unique_ptr<cuda::CudaBackend> gpu_;  // declared first: the buffers of this and derived tests go before it
  cpu::CpuBackend cpu_;
  std::mt19937 rng_;
};

}  // namespace flare::helios::gpu_testing

#endif  // FLARE_HAVE_CUDA
