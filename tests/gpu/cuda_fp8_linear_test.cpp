// GEMMs on FP8 E4M3 weights (kernels/fp8_linear.cu, cuda/gemm_runner.h) through
// CudaBackend::linear_fp8, against references computed on the host in double precision from the
// same E4M3 bytes and scales:
// - every FP8 skinny variant (frozen tables naming it): the CUDA-core ones for m 1..8 on BF16
//   activations as they are, the tensor-core ones for m 1..16 on activations quantized as for
//   cuBLASLt;
// - cuBLASLt's FP8 GEMM (a frozen table without the shape: the heuristic's first algorithm) for m
//   16 to 300, with the activations quantized exactly as the kernel does (per 128 elements of a
//   row, or per row), so the only differences are summation order, the FP8 tensor cores'
//   accumulation and the BF16 output rounding (rows past a multiple of 4 under block scaling go
//   to the skinny kernel and compare unquantized);
// - both weight scalings (128 x 128 blocks, one scale per row), with and without bias, outputs with
//   poisoned row padding; a race (unfrozen table) whose winner is checked against its own reference
//   and whose plan replays to the same bits inside a captured graph.
// Also: the backend keeps FP8 only for scalings it has a GEMM for.
#ifdef FLARE_HAVE_CUDA

#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpu_support.h"
#include "helios/cuda/cublaslt.h"
#include "helios/dtype.h"
#include "helios/gemm_tuning.h"

namespace flare::helios {
namespace {

using namespace gpu_testing;

struct Fp8Weight {
  std::int64_t n = 0, k = 0;
  bool blocks = true;               // 128 x 128 blocks, else one scale per row
  std::vector<std::uint8_t> bytes;  // [n, k] e4m3
  std::vector<float> scales;        // [ceil(n / 128)][k / 128], or [n]

  double scale(std::int64_t r, std::int64_t c) const {
    return blocks ? scales[std::size_t((r / 128) * (k / 128) + c / 128)] : scales[std::size_t(r)];
  }
  double value(std::int64_t r, std::int64_t c) const {
    return double(f8_e4m3_to_f32(bytes[std::size_t(r * k + c)])) * scale(r, c);
  }
};

class CudaFp8Linear : public BackendVersusCpuTest {
 protected:
  void SetUp() override {
    BackendVersusCpuTest::SetUp();
    if (!gpu_) return;
    if (gpu_->gemm_engine_name() != "cublaslt") GTEST_SKIP() << "cuBLASLt did not load";
    if (!gpu_->supports_fp8_weights(256, 512, 128, 128)) GTEST_SKIP() << "no block-scaled FP8 GEMM on this GPU";
    gpu_->reserve_fp8_linear(4096);
    lt_version_ = cuda::CublasLt(cuda::k_default_cuda_root).version();
  }

  // A weight drawn from N(0, 0.05) (a few large outliers), quantized per block or per row with
  // scale = amax / 448, as checkpoints are.
  Fp8Weight weight(std::int64_t n, std::int64_t k, bool blocks) {
    Fp8Weight w{n, k, blocks, std::vector<std::uint8_t>(std::size_t(n * k)), {}};
    std::normal_distribution<float> normal(0.0f, 0.05f);
    std::vector<float> real(std::size_t(n * k));
    for (auto& v : real) v = normal(rng_);
    for (std::int64_t i = 0; i < n * k; i += 997) real[std::size_t(i)] *= 20.0f;
    const std::int64_t block_rows = blocks ? 128 : 1, block_cols = blocks ? 128 : k;
    const std::int64_t scale_rows = (n + block_rows - 1) / block_rows, scale_cols = k / block_cols;
    w.scales.assign(std::size_t(scale_rows * scale_cols), 0.0f);
    for (std::int64_t r = 0; r < n; ++r) {
      for (std::int64_t c = 0; c < k; ++c) {
        float& s = w.scales[std::size_t((r / block_rows) * scale_cols + c / block_cols)];
        s = std::max(s, std::fabs(real[std::size_t(r * k + c)]) / 448.0f);
      }
    }
    for (std::int64_t r = 0; r < n; ++r) {
      for (std::int64_t c = 0; c < k; ++c) {
        const float s = w.scales[std::size_t((r / block_rows) * scale_cols + c / block_cols)];
        w.bytes[std::size_t(r * k + c)] = f32_to_f8_e4m3(real[std::size_t(r * k + c)] / s);
      }
    }
    return w;
  }

  std::vector<std::uint16_t> activations(std::int64_t m, std::int64_t k) {
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<std::uint16_t> x(std::size_t(m * k));
    for (auto& v : x) v = f32_to_bf16(uniform(rng_));
    if (m > 1) {  // one loud row, so per-row and per-block activation scales differ
      for (std::int64_t c = 0; c < k; ++c) x[std::size_t(k + c)] = f32_to_bf16(bf16_to_f32(x[std::size_t(k + c)]) * 37.0f);
    }
    return x;
  }

  // x as the quantization kernels leave it for cuBLASLt: e4m3(x / s) * s per 128-element block of a
  // row (blocks) or per row, s = amax / 448 (1 for an all-zero block).
  static std::vector<double> quantized(const std::vector<std::uint16_t>& x, std::int64_t m, std::int64_t k,
                                       bool blocks) {
    std::vector<double> out(x.size());
    const std::int64_t group = blocks ? 128 : k;
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t g = 0; g < k; g += group) {
        float amax = 0.0f;
        for (std::int64_t c = g; c < g + group; ++c) amax = std::max(amax, std::fabs(bf16_to_f32(x[std::size_t(r * k + c)])));
        const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
        const float inv = 1.0f / scale;
        for (std::int64_t c = g; c < g + group; ++c) {
          const float v = bf16_to_f32(x[std::size_t(r * k + c)]) * inv;
          out[std::size_t(r * k + c)] = double(f8_e4m3_to_f32(f32_to_f8_e4m3(v))) * double(scale);
        }
      }
    }
    return out;
  }

  static std::vector<double> widened(const std::vector<std::uint16_t>& x) {
    std::vector<double> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = bf16_to_f32(x[i]);
    return out;
  }

  // out[i][r] = sum_c x[i][c] * w(r, c) (+ bias[r]) in double.
  static std::vector<double> reference(const std::vector<double>& x, const Fp8Weight& w, std::int64_t m,
                                       const std::vector<float>* bias) {
    std::vector<double> dense(std::size_t(w.n * w.k));
    for (std::int64_t r = 0; r < w.n; ++r) {
      for (std::int64_t c = 0; c < w.k; ++c) dense[std::size_t(r * w.k + c)] = w.value(r, c);
    }
    std::vector<double> out(std::size_t(m * w.n));
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t r = 0; r < w.n; ++r) {
        double sum = bias ? double((*bias)[std::size_t(r)]) : 0.0;
        for (std::int64_t c = 0; c < w.k; ++c) sum += x[std::size_t(i * w.k + c)] * dense[std::size_t(r * w.k + c)];
        out[std::size_t(i * w.n + r)] = sum;
      }
    }
    return out;
  }

  struct DeviceWeight {
    std::unique_ptr<Buffer> bytes, scales;
    Tensor t;
    QuantizedWeight s;
  };
  DeviceWeight upload(const Fp8Weight& w) {
    DeviceWeight d;
    d.bytes = gpu_->allocate(w.bytes.size());
    gpu_->upload(*d.bytes, 0, w.bytes.data(), w.bytes.size());
    d.t = Tensor::of(*d.bytes, DType::f8_e4m3, w.n, w.k);
    d.scales = gpu_->allocate(w.scales.size() * 4);
    gpu_->upload(*d.scales, 0, w.scales.data(), w.scales.size() * 4);
    const std::int64_t scale_cols = w.blocks ? w.k / 128 : 1;
    d.s.scales = Tensor::of(*d.scales, DType::f32, std::int64_t(w.scales.size()) / scale_cols, scale_cols);
    d.s.block_rows = w.blocks ? 128 : 1;
    d.s.block_cols = w.blocks ? 128 : std::int32_t(w.k);
    return d;
  }

  // Runs linear_fp8 into a poisoned output with padded rows; its values.
  std::vector<float> run(const Matrix& x, const DeviceWeight& w, const Matrix* bias) {
    Matrix out = device_bf16(*gpu_, {}, x.t.rows, w.t.rows, w.t.rows + 8);
    gpu_->linear_fp8(x.t, w.t, w.s, bias ? &bias->t : nullptr, out.t);
    return device_values(*gpu_, out);
  }

  GemmShapeKey key(std::int64_t m, const Fp8Weight& w, bool bias) const {
    return {GemmTuning::bucket_m(m), w.n, w.k, DType::bf16, DType::f8_e4m3, bias, GemmFusion::none,
            gpu_->device().arch(), lt_version_};
  }

  std::uint64_t lt_version_ = 0;  // the tuning key's cuBLASLt version

  void install(GemmTuning table) {
    GemmTuning frozen = GemmTuning::parse(table.serialize());
    frozen.set_frozen(true);
    gpu_->install_gemm_tuning(std::move(frozen));
  }
};

// The RMS of row r of ref [rows, n].
double row_rms(const std::vector<double>& ref, std::size_t r, std::int64_t n) {
  double sq = 0.0;
  for (std::int64_t c = 0; c < n; ++c) sq += ref[r * std::size_t(n) + std::size_t(c)] * ref[r * std::size_t(n) + std::size_t(c)];
  return std::sqrt(sq / double(n));
}

// The largest error relative to its row's RMS (rows differ in loudness by design).
double max_row_relative_error(const std::vector<float>& got, const std::vector<double>& ref, std::int64_t n) {
  double worst = 0.0;
  for (std::size_t r = 0; r * std::size_t(n) < ref.size(); ++r) {
    const double rms = row_rms(ref, r, n) + 1e-30;
    for (std::int64_t c = 0; c < n; ++c) {
      const std::size_t i = r * std::size_t(n) + std::size_t(c);
      worst = std::max(worst, std::isfinite(got[i]) ? std::fabs(double(got[i]) - ref[i]) / rms : 1e30);
    }
  }
  return worst;
}

// BF16 output rounding (2^-8 relative) plus F32 summation order, and an allowance of 0.5% of the
// row's RMS: FP8 tensor cores keep fewer accumulator bits than F32 within a 128-element block.
::testing::AssertionResult close(const std::vector<float>& got, const std::vector<double>& ref, std::int64_t n,
                                 const std::string& what) {
  if (got.size() != ref.size()) return ::testing::AssertionFailure() << what << ": " << got.size() << " values";
  double max_abs = 0.0;
  std::size_t bad = 0, first_bad = 0;
  for (std::size_t r = 0; r * std::size_t(n) < ref.size(); ++r) {
    const double row_allowance = 5e-3 * row_rms(ref, r, n);
    for (std::int64_t c = 0; c < n; ++c) {
      const std::size_t i = r * std::size_t(n) + std::size_t(c);
      const double d = std::fabs(double(got[i]) - ref[i]);
      max_abs = std::max(max_abs, d);
      if (!std::isfinite(got[i]) || d > 1e-2 + 8e-3 * std::fabs(ref[i]) + row_allowance) {
        if (bad++ == 0) first_bad = i;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << got.size() << " off, first at " << first_bad
                                       << " (" << got[first_bad] << " vs " << ref[first_bad] << "), max abs " << max_abs;
}

// Which FP8 scale-mode combinations cuBLASLt's heuristic answers on this GPU, for the runner's
// operand roles (A = weights transposed, B = activations): the runner depends on the first two.
TEST(CudaFp8Probe, CublasLtHasBlockScaledFp8) {
  std::string reason;
  auto gpu = try_cuda_backend(&reason);
  if (!gpu) GTEST_SKIP() << reason;
  if (gpu->device().arch() != "sm_90") GTEST_SKIP() << "block-scaled FP8 is a Hopper feature of cuBLASLt";
  const cuda::CublasLt lt(cuda::k_default_cuda_root);
  const auto& api = lt.api();
  const auto gpu_buffer = gpu->allocate(1 << 20);
  const void* scales = gpu_buffer->data();
  struct Config {
    const char* name;
    cublasLtMatmulMatrixScale_t a, b;
    bool pointers;
  };
  int working_blocks = 0, working_rows = 0;
  for (const Config c : {Config{"blk128x128 x vec128, no pointers", CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
                                CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, false},
                         Config{"blk128x128 x vec128", CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
                                CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, true},
                         Config{"vec128 x vec128", CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
                                CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, true},
                         Config{"vec128 x blk128x128", CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
                                CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, true},
                         Config{"outer x outer, no pointers", CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
                                CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, false},
                         Config{"outer x outer", CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
                                CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, true},
                         Config{"scalar x scalar", CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F,
                                CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, true}}) {
    for (const std::int64_t m : {1, 64, 256}) {
      const std::int64_t n = 1024, k = 1024;
      cuda::MatmulDesc desc(lt, CUBLAS_COMPUTE_32F, CUDA_R_32F);
      desc.set(CUBLASLT_MATMUL_DESC_TRANSA, cublasOperation_t(CUBLAS_OP_T));
      desc.set(CUBLASLT_MATMUL_DESC_TRANSB, cublasOperation_t(CUBLAS_OP_N));
      desc.set(CUBLASLT_MATMUL_DESC_A_SCALE_MODE, std::int32_t(c.a));
      desc.set(CUBLASLT_MATMUL_DESC_B_SCALE_MODE, std::int32_t(c.b));
      if (c.pointers) {
        desc.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, scales);
        desc.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, scales);
      }
      cuda::MatrixLayout a(lt, CUDA_R_8F_E4M3, k, n, k), b(lt, CUDA_R_8F_E4M3, k, m, k), d(lt, CUDA_R_16BF, n, m, n);
      cuda::MatmulPreference pref(lt);
      pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, std::uint64_t(32) << 20);
      cublasLtMatmulHeuristicResult_t results[8]{};
      int n_returned = 0;
      const cublasStatus_t status = api.algo_get_heuristic(lt.handle(), desc.get(), a.get(), b.get(), d.get(), d.get(),
                                                           pref.get(), 8, results, &n_returned);
      std::printf("[ probe    ] %-34s m %4lld: %s, %d algorithms\n", c.name, (long long)m, lt.status_name(status).c_str(),
                  status == CUBLAS_STATUS_SUCCESS ? n_returned : 0);
      if (status == CUBLAS_STATUS_SUCCESS && n_returned > 0 && c.pointers) {
        if (c.a == CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F) ++working_blocks;
        if (c.a == CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F) ++working_rows;
      }
    }
  }
  EXPECT_EQ(working_blocks, 2) << "128 x 128 weight blocks with 1 x 128 activation blocks (not at m = 1)";
  EXPECT_EQ(working_rows, 3) << "per-row weight scales with per-token activation scales";
}

TEST_F(CudaFp8Linear, KeepsOnlyScalingsItHasAGemmFor) {
  EXPECT_TRUE(gpu_->supports_fp8_weights(4096, 4096, 128, 128));
  EXPECT_TRUE(gpu_->supports_fp8_weights(4096, 4096, 1, 4096));
  EXPECT_TRUE(gpu_->supports_fp8_weights(1024, 272, 1, 1 << 30)) << "per-row scales, any k % 16 == 0";
  EXPECT_FALSE(gpu_->supports_fp8_weights(260, 4096, 128, 128)) << "cuBLASLt has no algorithm for n = 260";
  EXPECT_FALSE(gpu_->supports_fp8_weights(4096, 4096, 64, 64));
  EXPECT_FALSE(gpu_->supports_fp8_weights(4096, 4096, 1, 128)) << "per-group scales";
  EXPECT_FALSE(gpu_->supports_fp8_weights(4096, 4224, 128, 128)) << "k / 128 = 33 scales: not cuBLASLt's layout";
  EXPECT_FALSE(gpu_->supports_fp8_weights(4096, 4100, 1, 4100)) << "k % 16 != 0";
}

TEST_F(CudaFp8Linear, EverySkinnyVariantMatchesTheReference) {
  int n_runs = 0;
  for (const bool blocks : {true, false}) {
    for (const auto& [n, k] : {std::pair<std::int64_t, std::int64_t>{1000, 512}, {260, 4096}}) {
      const Fp8Weight w = weight(n, k, blocks);
      const DeviceWeight dw = upload(w);
      std::vector<float> bias(static_cast<std::size_t>(n));
      for (auto& b : bias) b = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng_);
      const Matrix gb = device_f32(*gpu_, bias, 1, n);
      for (const std::int64_t m : {1, 2, 3, 5, 8, 13, 16}) {
        const std::vector<std::uint16_t> x = activations(m, k);
        const Matrix gx = device_bf16(*gpu_, x, m, k, k + 24);
        for (const bool with_bias : {false, true}) {
          const std::vector<double> unquantized = reference(widened(x), w, m, with_bias ? &bias : nullptr);
          const std::vector<double> quantized_ref = reference(quantized(x, m, k, blocks), w, m, with_bias ? &bias : nullptr);
          for (std::uint8_t v = 0; v < k_fp8_skinny_n_variants; ++v) {
            const bool mma = v >= k_fp8_mma_first_variant;
            if (m > (mma ? k_fp8_mma_max_m : k_fp8_skinny_max_m)) continue;
            const std::vector<double>& ref = mma ? quantized_ref : unquantized;
            GemmTuning table;
            table.insert(key(m, w, with_bias),
                         {.kind = GemmKind::skinny_fp8, .variant = v, .algo = {}, .time_us = 1.0f, .n_candidates = 1});
            install(table);
            const std::string what = fmt::format("{} [{}, {}] x [{}, {}]^T{} skinny v{}", blocks ? "blocks" : "rows",
                                                 m, k, n, k, with_bias ? " + bias" : "", v);
            EXPECT_TRUE(close(run(gx, dw, with_bias ? &gb : nullptr), ref, n, what));
            EXPECT_EQ(gpu_->gemm_tuning().n_timed(), 0);
            ++n_runs;
          }
        }
      }
    }
  }
  std::printf("[ fp8      ] %d skinny runs compared\n", n_runs);
}

TEST_F(CudaFp8Linear, CublasLtMatchesTheQuantizedReference) {
  install(GemmTuning());  // frozen and empty: the heuristic's first cuBLASLt algorithm for every shape
  for (const bool blocks : {true, false}) {
    for (const auto& [n, k] : {std::pair<std::int64_t, std::int64_t>{1024, 512}, {256, 4096}, {1000, 2048}}) {
      const Fp8Weight w = weight(n, k, blocks);
      const DeviceWeight dw = upload(w);
      const std::vector<float> bias(static_cast<std::size_t>(n), 0.5f);
      const Matrix gb = device_f32(*gpu_, bias, 1, n);
      for (const std::int64_t m : {16, 17, 64, 77, 300}) {
        const std::vector<std::uint16_t> x = activations(m, k);
        const Matrix gx = device_bf16(*gpu_, x, m, k, m % 2 == 0 ? k : k + 8);
        const bool with_bias = m % 3 == 0;
        // Block scaling splits off the rows past the last multiple of 4 to the skinny kernel, which
        // reads the activations unquantized.
        const std::int64_t head = blocks ? m / 4 * 4 : m;
        std::vector<double> ref = reference(quantized(x, m, k, blocks), w, m, with_bias ? &bias : nullptr);
        const std::vector<double> unquantized = reference(widened(x), w, m, with_bias ? &bias : nullptr);
        std::copy(unquantized.begin() + head * n, unquantized.end(), ref.begin() + head * n);
        const std::string what =
            fmt::format("{} [{}, {}] x [{}, {}]^T{} cuBLASLt", blocks ? "blocks" : "rows", m, k, n, k, with_bias ? " + bias" : "");
        const std::vector<float> got = run(gx, dw, with_bias ? &gb : nullptr);
        std::printf("[ error    ] %s: %.2e of the row RMS (BF16 activations: %.2e)\n", what.c_str(),
                    max_row_relative_error(got, ref, n), max_row_relative_error(got, unquantized, n));
        EXPECT_TRUE(close(got, ref, n, what));
      }
    }
  }
}

TEST_F(CudaFp8Linear, RaceWinnerMatchesItsReferenceAndReplaysInAGraph) {
  GemmTuning tuning;
  gpu_->install_gemm_tuning(std::move(tuning));
  const std::int64_t n = 1536, k = 4096;
  for (const bool blocks : {true, false}) {
    const Fp8Weight w = weight(n, k, blocks);
    const DeviceWeight dw = upload(w);
    for (const std::int64_t m : {1, 4, 64}) {
      const std::vector<std::uint16_t> x = activations(m, k);
      const Matrix gx = device_bf16(*gpu_, x, m, k, k);
      const std::vector<float> first = run(gx, dw, nullptr);
      const GemmChoice* won = gpu_->gemm_tuning().find(key(m, w, false));
      ASSERT_NE(won, nullptr);
      const bool skinny = won->kind == GemmKind::skinny_fp8;
      std::printf("[ race     ] %s [%lld, %lld] x [%lld, %lld]^T: %s variant %u, %.2f us, best of %u\n",
                  blocks ? "blocks" : "rows", (long long)m, (long long)k, (long long)n, (long long)k,
                  skinny ? "fp8 skinny" : "cublaslt", unsigned(won->variant), won->time_us, unsigned(won->n_candidates));
      const std::vector<double> ref = reference(skinny ? widened(x) : quantized(x, m, k, blocks), w, m, nullptr);
      EXPECT_TRUE(close(first, ref, n, fmt::format("m {} race winner", m)));

      Matrix out = device_bf16(*gpu_, {}, m, n, n + 8);
      const auto graph = gpu_->capture([&] { gpu_->linear_fp8(gx.t, dw.t, dw.s, nullptr, out.t); });
      gpu_->replay(*graph);
      EXPECT_EQ(device_values(*gpu_, out), first) << "m " << m << ": the graph replays the plan's kernel";
    }
  }
}

}  // namespace
}  // namespace flare::helios

#endif  // FLARE_HAVE_CUDA
