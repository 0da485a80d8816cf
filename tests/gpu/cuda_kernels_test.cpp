// Each NVRTC kernel (src/helios/kernels) against the CPU backend's operation (the reference) on
// fresh random inputs: BF16 inputs go to the GPU as they are and to the CPU widened to F32; GPU
// outputs (and the padding between rows) are poisoned with NaN before each launch so unwritten
// elements show; each test prints the max abs/rel error. Skips where no GPU or NVRTC is visible.
#ifdef FLARE_HAVE_CUDA

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/cpu/cpu_backend.h"
#include "helios/cuda/driver.h"
#include "helios/cuda/kernel_sources.h"
#include "helios/cuda/nvrtc.h"

namespace flare::helios {
namespace {

namespace fs = std::filesystem;
using cuda::CompileOptions;
using cuda::DeviceMemory;

constexpr std::uint16_t k_poison_bf16 = 0x7fc1;  // a quiet NaN no kernel produces by rounding

// A strided bf16 matrix on the device: rows x cols, `stride` elements between row starts.
struct DeviceMatrix {
  std::int64_t rows = 0, cols = 0, stride = 0;
  std::unique_ptr<DeviceMemory> memory;
  CUdeviceptr address() const { return memory->address(); }
};

class CudaKernelsTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda::driver_available(&reason)) GTEST_SKIP() << "no CUDA driver: " << reason;
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
    nvrtc_ = cuda::Nvrtc::try_load(cuda::k_default_cuda_root, &reason);
    if (!nvrtc_) GTEST_SKIP() << "NVRTC unavailable: " << reason;
    context_ = std::make_unique<cuda::Context>(0);
    stream_ = std::make_unique<cuda::Stream>();
    cache_dir_ = fs::temp_directory_path() / ("flare-gpu-kernels-" + std::to_string(::getpid()));
    cache_ = std::make_unique<KernelCache>(cache_dir_);
    const std::uint32_t seed = std::random_device{}();
    rng_.seed(seed);
    std::printf("[ device   ] %s (%s), seed %u\n", context_->device().name.c_str(), context_->device().arch().c_str(), seed);
  }
  void TearDown() override {
    modules_.clear();
    stream_.reset();
    context_.reset();
    if (!cache_dir_.empty()) fs::remove_all(cache_dir_);
  }

  CUfunction kernel(const std::string& name, std::vector<std::pair<std::string, std::string>> defines = {}) {
    CompileOptions o;
    o.arch = context_->device().arch();
    o.defines = std::move(defines);
    const std::string cubin = nvrtc_->compile_cached(*cache_, cuda::embedded_kernel(name), o);
    modules_.push_back(std::make_unique<cuda::Module>(name, cubin));
    return modules_.back()->function(("flare_" + name).c_str());
  }

  std::vector<std::uint16_t> random_bf16(std::size_t n, float scale) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<std::uint16_t> v(n);
    for (auto& x : v) x = f32_to_bf16(normal(rng_));
    return v;
  }
  std::vector<float> random_f32(std::size_t n, float lo, float hi) {
    std::uniform_real_distribution<float> uniform(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = uniform(rng_);
    return v;
  }

  // Uploads rows x cols values into a matrix of `stride` (padding poisoned).
  DeviceMatrix upload_bf16(const std::vector<std::uint16_t>& values, std::int64_t rows, std::int64_t cols,
                           std::int64_t stride) {
    std::vector<std::uint16_t> padded(std::size_t(rows * stride), k_poison_bf16);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::copy_n(values.begin() + r * cols, cols, padded.begin() + r * stride);
    }
    DeviceMatrix m{rows, cols, stride, std::make_unique<DeviceMemory>(padded.size() * 2)};
    cuda::copy_to_device(m.address(), padded.data(), padded.size() * 2, *stream_);
    stream_->synchronize();
    return m;
  }
  DeviceMatrix poisoned_bf16(std::int64_t rows, std::int64_t cols, std::int64_t stride) {
    return upload_bf16(std::vector<std::uint16_t>(std::size_t(rows * cols), k_poison_bf16), rows, cols, stride);
  }
  template <typename T>
  std::unique_ptr<DeviceMemory> upload(const std::vector<T>& values) {
    auto m = std::make_unique<DeviceMemory>(values.size() * sizeof(T));
    cuda::copy_to_device(m->address(), values.data(), values.size() * sizeof(T), *stream_);
    stream_->synchronize();
    return m;
  }
  // Downloads rows x cols as f32; fails the test if padding lost its poison.
  std::vector<float> download_bf16(const DeviceMatrix& m) {
    std::vector<std::uint16_t> raw(std::size_t(m.rows * m.stride));
    cuda::copy_to_host(raw.data(), m.address(), raw.size() * 2, *stream_);
    stream_->synchronize();
    std::vector<float> out;
    for (std::int64_t r = 0; r < m.rows; ++r) {
      for (std::int64_t c = 0; c < m.stride; ++c) {
        const std::uint16_t bits = raw[std::size_t(r * m.stride + c)];
        if (c < m.cols) {
          out.push_back(bf16_to_f32(bits));
        } else {
          EXPECT_EQ(bits, k_poison_bf16) << "padding written at row " << r << " col " << c;
        }
      }
    }
    return out;
  }

  // Checks |gpu - ref| <= atol + rtol * |ref| everywhere and prints the max errors.
  static void expect_close(const char* what, const std::vector<float>& gpu, const std::vector<float>& ref, float atol,
                           float rtol) {
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
    std::printf("[ error    ] %-34s n=%zu max_abs=%.3e max_rel=%.3e\n", what, gpu.size(), max_abs, max_rel);
    EXPECT_EQ(n_bad, 0u) << what << ": first mismatch at " << first_bad << ": gpu " << gpu[first_bad] << " vs cpu "
                         << ref[first_bad];
  }

  void launch(CUfunction f, const cuda::LaunchShape& shape, std::vector<void*> args, const char* name) {
    cuda::launch(f, shape, *stream_, std::move(args), name);
    stream_->synchronize();
  }

  // A CPU step of `row_tokens[i]` tokens per row starting at `row_starts[i]` (pages of 16 tokens).
  void cpu_begin_step(const std::vector<std::int32_t>& tokens, const std::vector<std::int32_t>& row_tokens,
                      const std::vector<std::int32_t>& row_starts) {
    Step step;
    step.tokens = tokens;
    for (std::size_t r = 0; r < row_tokens.size(); ++r) {
      StepRow row;
      row.n_tokens = row_tokens[r];
      row.start_position = row_starts[r];
      row.first_block = std::int32_t(step.block_tables.size());
      row.n_blocks = (row.start_position + row.n_tokens + 15) / 16;
      for (std::int32_t b = 0; b < row.n_blocks; ++b) step.block_tables.push_back(std::int32_t(step.block_tables.size()));
      step.rows.push_back(row);
    }
    KvCacheLayout layout;
    layout.n_layers = 1;
    layout.n_pages = std::int32_t(step.block_tables.size());
    layout.page_size_tokens = 16;
    layout.n_kv_heads = 1;
    layout.head_dim = 8;
    layout.dtype = DType::f32;
    kv_ = cpu_.allocate_kv_cache(layout);
    cpu_.begin_step(step, kv_);
  }

  // A CPU f32 tensor holding bf16 values widened.
  Tensor cpu_tensor(std::vector<std::unique_ptr<Buffer>>& keep, const std::vector<std::uint16_t>& bf16, std::int64_t rows,
                    std::int64_t cols) {
    keep.push_back(cpu_.allocate(std::size_t(rows * cols) * 4));
    float* p = static_cast<float*>(keep.back()->data());
    for (std::size_t i = 0; i < bf16.size(); ++i) p[i] = bf16_to_f32(bf16[i]);
    return Tensor::of(*keep.back(), DType::f32, rows, cols);
  }
  static std::vector<float> values(const Tensor& t) {
    const float* p = static_cast<const float*>(t.data);
    return std::vector<float>(p, p + t.rows * t.cols);
  }

  std::unique_ptr<cuda::Nvrtc> nvrtc_;
  std::unique_ptr<cuda::Context> context_;
  std::unique_ptr<cuda::Stream> stream_;
  std::vector<std::unique_ptr<cuda::Module>> modules_;
  fs::path cache_dir_;
  std::unique_ptr<KernelCache> cache_;
  std::mt19937 rng_;
  cpu::CpuBackend cpu_{2};
  KvCache kv_;
};

TEST_F(CudaKernelsTest, Embedding) {
  for (const auto& [vocab, cols, pad] : std::vector<std::tuple<int, int, int>>{{1000, 512, 8}, {300, 100, 3}}) {
    const std::int64_t n_tokens = 37;
    const auto table = random_bf16(std::size_t(vocab) * cols, 1.0f);
    std::uniform_int_distribution<int> token_dist(0, vocab - 1);
    std::vector<std::int32_t> tokens(n_tokens);
    for (auto& t : tokens) t = token_dist(rng_);
    cpu_begin_step(tokens, {20, 17}, {0, 5});

    std::vector<std::unique_ptr<Buffer>> keep;
    const Tensor cpu_table{nullptr, DType::bf16, vocab, cols, cols};
    keep.push_back(cpu_.allocate(table.size() * 2));
    std::memcpy(keep.back()->data(), table.data(), table.size() * 2);
    Tensor ct = cpu_table;
    ct.data = keep.back()->data();
    keep.push_back(cpu_.allocate(std::size_t(n_tokens * cols) * 4));
    const Tensor cpu_out = Tensor::of(*keep.back(), DType::f32, n_tokens, cols);
    cpu_.embedding(ct, cpu_out);

    DeviceMatrix d_table = upload_bf16(table, vocab, cols, cols + pad);
    auto d_tokens = upload(tokens);
    DeviceMatrix d_out = poisoned_bf16(n_tokens, cols, cols + pad);
    CUdeviceptr table_ptr = d_table.address(), tokens_ptr = d_tokens->address(), out_ptr = d_out.address();
    long long table_stride = d_table.stride, out_stride = d_out.stride;
    int vocab_i = vocab, cols_i = cols;
    launch(kernel("embedding"), {.grid_x = unsigned(n_tokens), .block_x = 256},
           {&table_ptr, &table_stride, &vocab_i, &tokens_ptr, &out_ptr, &out_stride, &cols_i}, "embedding");
    expect_close(cols % 8 == 0 ? "embedding (16-byte copies)" : "embedding (element copies)", download_bf16(d_out),
                 values(cpu_out), 0.0f, 0.0f);
  }
}


TEST_F(CudaKernelsTest, RmsNormWithAndWithoutResidual) {
  for (const auto& [rows, cols] : std::vector<std::pair<int, int>>{{7, 4096}, {3, 1000}, {1, 96}}) {
    for (const bool with_residual : {false, true}) {
      const auto x = random_bf16(std::size_t(rows) * cols, 2.0f);
      const auto res = random_bf16(std::size_t(rows) * cols, 4.0f);
      const auto weight = random_f32(std::size_t(cols), 0.5f, 1.5f);
      const float eps = 1e-6f;

      std::vector<std::unique_ptr<Buffer>> keep;
      const Tensor cx = cpu_tensor(keep, x, rows, cols);
      Tensor cres = cpu_tensor(keep, res, rows, cols);
      keep.push_back(cpu_.allocate(weight.size() * 4));
      std::memcpy(keep.back()->data(), weight.data(), weight.size() * 4);
      const Tensor cw = Tensor::of(*keep.back(), DType::f32, 1, cols);
      keep.push_back(cpu_.allocate(std::size_t(rows * cols) * 4));
      const Tensor cout = Tensor::of(*keep.back(), DType::f32, rows, cols);
      cpu_.rms_norm(cx, with_residual ? &cres : nullptr, cw, eps, cout);

      DeviceMatrix dx = upload_bf16(x, rows, cols, cols + 8);
      DeviceMatrix dres = upload_bf16(res, rows, cols, cols + 16);
      auto dw = upload(weight);
      DeviceMatrix dout = poisoned_bf16(rows, cols, cols + 24);
      CUdeviceptr x_ptr = dx.address(), res_ptr = with_residual ? dres.address() : 0, w_ptr = dw->address(),
                  out_ptr = dout.address();
      long long x_stride = dx.stride, res_stride = dres.stride, out_stride = dout.stride;
      int cols_i = int(cols);
      float eps_v = eps;
      launch(kernel("rms_norm"), {.grid_x = unsigned(rows), .block_x = 256},
             {&x_ptr, &x_stride, &res_ptr, &res_stride, &w_ptr, &eps_v, &out_ptr, &out_stride, &cols_i}, "rms_norm");
      const std::string label = fmt::format("rms_norm{} [{}, {}]", with_residual ? "+residual" : "", rows, cols);
      expect_close(label.c_str(), download_bf16(dout), values(cout), 1e-3f, 1.6e-2f);
      if (with_residual) {
        expect_close((label + " residual").c_str(), download_bf16(dres), values(cres), 1e-3f, 4e-3f);
      }
    }
  }
}

TEST_F(CudaKernelsTest, HeadRmsNorm) {
  for (const auto& [head_dim, n_heads, rows] : std::vector<std::tuple<int, int, int>>{{128, 8, 9}, {64, 3, 5}, {80, 2, 4}}) {
    const std::int64_t cols = std::int64_t(head_dim) * n_heads;
    const auto x = random_bf16(std::size_t(rows * cols), 3.0f);
    const auto weight = random_f32(std::size_t(head_dim), 0.5f, 1.5f);
    const float eps = 1e-6f;

    std::vector<std::unique_ptr<Buffer>> keep;
    const Tensor cx = cpu_tensor(keep, x, rows, cols);
    keep.push_back(cpu_.allocate(weight.size() * 4));
    std::memcpy(keep.back()->data(), weight.data(), weight.size() * 4);
    const Tensor cw = Tensor::of(*keep.back(), DType::f32, 1, head_dim);
    cpu_.head_rms_norm(cx, head_dim, cw, eps);

    DeviceMatrix dx = upload_bf16(x, rows, cols, cols + 8);
    auto dw = upload(weight);
    CUdeviceptr x_ptr = dx.address(), w_ptr = dw->address();
    long long stride = dx.stride;
    int rows_i = rows, n_heads_i = n_heads;
    float eps_v = eps;
    const unsigned n_threads = unsigned(rows * n_heads * 32);
    launch(kernel("head_rms_norm", {{"HEAD_DIM", std::to_string(head_dim)}}),
           {.grid_x = (n_threads + 255) / 256, .block_x = 256}, {&x_ptr, &stride, &rows_i, &n_heads_i, &w_ptr, &eps_v},
           "head_rms_norm");
    const std::string label = fmt::format("head_rms_norm hd={} heads={}", head_dim, n_heads);
    expect_close(label.c_str(), download_bf16(dx), values(cx), 1e-3f, 1.6e-2f);
  }
}

TEST_F(CudaKernelsTest, Rotary) {
  struct Case {
    int head_dim, half, n_q_heads, n_k_heads;
    bool per_row_freq;
  };
  for (const Case& c : {Case{128, 64, 8, 2, false}, Case{128, 32, 4, 4, true}, Case{64, 32, 6, 2, true}}) {
    const std::vector<std::int32_t> row_tokens = {9, 1, 14}, row_starts = {0, 4093, 700};
    const std::int64_t n_tokens = 24, n_rows = 3;
    cpu_begin_step(std::vector<std::int32_t>(std::size_t(n_tokens), 0), row_tokens, row_starts);
    std::vector<std::int32_t> positions, token_rows;
    for (std::int64_t r = 0; r < n_rows; ++r) {
      for (int i = 0; i < row_tokens[std::size_t(r)]; ++i) {
        positions.push_back(row_starts[std::size_t(r)] + i);
        token_rows.push_back(std::int32_t(r));
      }
    }
    const std::int64_t freq_rows = c.per_row_freq ? n_rows : 1;
    std::vector<float> inv_freq(std::size_t(freq_rows * c.half));
    for (std::int64_t r = 0; r < freq_rows; ++r) {
      const float base = 10000.0f * float(r + 1);
      for (int i = 0; i < c.half; ++i) inv_freq[std::size_t(r * c.half + i)] = std::pow(base, -float(i) / float(c.half));
    }
    const float attention_factor = c.per_row_freq ? 1.1f : 1.0f;
    const std::int64_t q_cols = std::int64_t(c.head_dim) * c.n_q_heads, k_cols = std::int64_t(c.head_dim) * c.n_k_heads;
    const auto q = random_bf16(std::size_t(n_tokens * q_cols), 1.0f);
    const auto k = random_bf16(std::size_t(n_tokens * k_cols), 1.0f);

    std::vector<std::unique_ptr<Buffer>> keep;
    const Tensor cq = cpu_tensor(keep, q, n_tokens, q_cols);
    const Tensor ck = cpu_tensor(keep, k, n_tokens, k_cols);
    keep.push_back(cpu_.allocate(inv_freq.size() * 4));
    std::memcpy(keep.back()->data(), inv_freq.data(), inv_freq.size() * 4);
    RotaryParams rope{Tensor::of(*keep.back(), DType::f32, freq_rows, c.half), attention_factor};
    cpu_.rotary(cq, ck, c.head_dim, rope);

    DeviceMatrix dq = upload_bf16(q, n_tokens, q_cols, q_cols + 8);
    DeviceMatrix dk = upload_bf16(k, n_tokens, k_cols, k_cols);
    auto d_freq = upload(inv_freq);
    auto d_pos = upload(positions);
    auto d_rows = upload(token_rows);
    CUdeviceptr q_ptr = dq.address(), k_ptr = dk.address(), f_ptr = d_freq->address(), p_ptr = d_pos->address(),
                r_ptr = d_rows->address();
    long long q_stride = dq.stride, k_stride = dk.stride, f_stride = c.half;
    int n_q = c.n_q_heads, n_k = c.n_k_heads, f_rows = int(freq_rows);
    float factor = attention_factor;
    launch(kernel("rotary", {{"HEAD_DIM", std::to_string(c.head_dim)}, {"ROTARY_HALF", std::to_string(c.half)}}),
           {.grid_x = unsigned(n_tokens), .block_x = 256},
           {&q_ptr, &q_stride, &n_q, &k_ptr, &k_stride, &n_k, &f_ptr, &f_stride, &f_rows, &factor, &p_ptr, &r_ptr},
           "rotary");
    const std::string label = fmt::format("rotary hd={} half={} {}", c.head_dim, c.half,
                                          c.per_row_freq ? "per-row" : "shared");
    expect_close((label + " q").c_str(), download_bf16(dq), values(cq), 1e-2f, 1e-2f);
    expect_close((label + " k").c_str(), download_bf16(dk), values(ck), 1e-2f, 1e-2f);
  }
}

TEST_F(CudaKernelsTest, SwiGlu) {
  for (const auto& [rows, inter] : std::vector<std::pair<int, int>>{{5, 3000}, {2, 11008}, {1, 17}}) {
    const auto gate_up = random_bf16(std::size_t(rows) * 2 * inter, 3.0f);
    std::vector<std::unique_ptr<Buffer>> keep;
    const Tensor cgu = cpu_tensor(keep, gate_up, rows, 2 * inter);
    keep.push_back(cpu_.allocate(std::size_t(rows) * inter * 4));
    const Tensor cout = Tensor::of(*keep.back(), DType::f32, rows, inter);
    cpu_.swiglu(cgu, cout);

    DeviceMatrix dgu = upload_bf16(gate_up, rows, 2 * inter, 2 * inter + 8);
    DeviceMatrix dout = poisoned_bf16(rows, inter, inter + 5);
    CUdeviceptr gu_ptr = dgu.address(), out_ptr = dout.address();
    long long gu_stride = dgu.stride, out_stride = dout.stride;
    int inter_i = inter;
    const unsigned blocks_x = std::min(unsigned((inter + 255) / 256), 64u);
    launch(kernel("swiglu"), {.grid_x = blocks_x, .grid_y = unsigned(rows), .block_x = 256},
           {&gu_ptr, &gu_stride, &out_ptr, &out_stride, &inter_i}, "swiglu");
    const std::string label = fmt::format("swiglu [{}, {}]", rows, inter);
    expect_close(label.c_str(), download_bf16(dout), values(cout), 1e-3f, 1e-2f);
  }
}

TEST_F(CudaKernelsTest, CacheServesTheSecondLoad) {
  kernel("swiglu");
  const std::int64_t n_builds = cache_->n_builds();
  kernel("swiglu");
  EXPECT_EQ(cache_->n_builds(), n_builds);
  EXPECT_GE(cache_->n_hits(), 1);
}

TEST(CudaDriver, ErrorsNameTheCall) {
  std::string reason;
  if (!cuda::driver_available(&reason)) GTEST_SKIP() << "no CUDA driver: " << reason;
  try {
    cuda::check(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuMemAlloc"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("CUDA_ERROR_INVALID_VALUE"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cuda::device_info(cuda::device_count()), Error);
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
