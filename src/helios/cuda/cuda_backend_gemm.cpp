// The CUDA backend's GEMMs through cuBLASLt and the skinny kernel (gemm_runner.h), kept apart from
// cuda_backend.cpp: the GEMM runner over the cuBLASLt the constructor loaded, the skinny kernel's
// entry points (from the modules the constructor compiled with the others) and the saved tuning
// table, running linear() on them, and the bias add for output types whose epilogue cannot take an
// F32 bias. Without cuBLASLt, linear() keeps the NVRTC kernel.
#include <algorithm>
#include <optional>

#include "common/error.h"
#include "helios/cuda/cuda_backend.h"
#include "helios/cuda/tensor_checks.h"

namespace flare::helios::cuda {

void CudaBackend::init_gemm(const std::filesystem::path& kernel_cache_dir) {
  if (!cublaslt_) return;  // the NVRTC kernel serves; gemm_engine_name() says so
  // Loaded now, not on first use, since first use may be inside a graph capture (and so that an
  // export's kernel images include them).
  auto skinny = std::make_unique<SkinnyGemm>(
      [this](const std::string& entry, int tile) {
        return function(k_skinny_gemm_source, entry, skinny_tile_defines(tile));
      },
      early_work_programmatic_launch(device(), options_.dependent_launch));
  gemm_ = std::make_unique<GemmRunner>(*cublaslt_, device().arch(), stream_, std::move(skinny));
  gemm_->set_l2_bytes(device().l2_bytes);
  gemm_->set_race_log(options_.gemm_race_log);
  if (stream_gemm_wanted()) {  // its modules were precompiled with the others
    gemm_->set_stream_gemm(std::make_unique<StreamGemm>(
        [this](const std::string& entry, int tile) {
          return function(k_stream_gemm_source, entry, stream_tile_defines(tile));
        },
        early_work_programmatic_launch(device(), options_.dependent_launch)));
  }
  function("bias_add", "flare_bias_add_bf16");
  function("bias_add", "flare_bias_add_f32");
  gemm_tuning_.attach_file(GemmTuning::file_in(kernel_cache_dir, device().arch(), cublaslt_->version(),
                                               gemm_tuning_.effort()));
}

void CudaBackend::set_gemm_effort(TuneEffort effort) {
  GemmTuning tuning;
  tuning.set_effort(effort);
  if (cublaslt_ && effort != TuneEffort::off) {  // off races nothing, so it has nothing to save
    tuning.attach_file(GemmTuning::file_in(cache_.dir(), device().arch(), cublaslt_->version(), effort));
  }
  install_gemm_tuning(std::move(tuning));
}

void CudaBackend::install_gemm_tuning(GemmTuning tuning) {
  gemm_tuning_ = std::move(tuning);
  if (gemm_) gemm_->clear_plans();
}

GemmOperands CudaBackend::gemm_operands(const Tensor& x, const Tensor& weight, const Tensor& out) {
  return {.x = address(x),
          .x_stride = x.stride,
          .w = address(weight),
          .w_stride = weight.stride,
          .w_dtype = weight.dtype,
          .out = address(out),
          .out_stride = out.stride,
          .out_dtype = out.dtype,
          .m = x.rows,
          .n = weight.rows,
          .k = weight.cols};
}

bool CudaBackend::linear_cublaslt(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out) {
  if (!gemm_ || x.rows == 0) return false;
  GemmOperands op = gemm_operands(x, weight, out);
  op.bias = bias ? address(*bias) : 0;
  const GemmResult result = gemm_->run(op, gemm_tuning_);
  if (result == GemmResult::unsupported) return false;
  if (result == GemmResult::bias_pending) add_bias(out, op.bias);
  return true;
}

void CudaBackend::add_bias(const Tensor& out, CUdeviceptr bias) {
  const bool to_f32 = out.dtype == DType::f32;
  CUdeviceptr out_ptr = address(out), bias_ptr = bias;
  long long out_stride = out.stride;
  int cols = int(out.cols);
  launch(function("bias_add", to_f32 ? "flare_bias_add_f32" : "flare_bias_add_bf16"),
         {.grid_x = std::min(unsigned((cols + 255) / 256), 64u), .grid_y = unsigned(out.rows), .block_x = 256},
         {&out_ptr, &out_stride, &bias_ptr, &cols}, "bias_add");
}

namespace {

// The scaling of blocks the FP8 GEMMs take; nullopt for any other.
std::optional<Fp8Scaling> fp8_scaling(std::int64_t cols, std::int32_t block_rows, std::int32_t block_cols) {
  if (block_rows == 1 && block_cols >= cols) return Fp8Scaling::rows;
  // cuBLASLt's BLK128x128 scales are column-major with a leading dimension rounded up to 4 scales
  // (16 bytes): the package's row-major [n / 128][k / 128] is that layout when k / 128 % 4 == 0.
  if (block_rows == 128 && block_cols == 128 && cols % 128 == 0 && (cols / 128) % 4 == 0) return Fp8Scaling::blocks_128;
  return std::nullopt;
}

}  // namespace

bool CudaBackend::supports_fp8_weights(std::int64_t rows, std::int64_t cols, std::int32_t block_rows,
                                       std::int32_t block_cols) {
  const std::optional<Fp8Scaling> scaling = fp8_scaling(cols, block_rows, block_cols);
  if (!gemm_ || !scaling || cols % 16 != 0) return false;
  return gemm_->fp8_cublaslt_available(rows, cols, *scaling);
}

void CudaBackend::reserve_fp8_linear(std::int64_t max_cols) {
  if (!gemm_) fail(ExitCode::failure, "internal: FP8 weights on a CUDA backend without cuBLASLt");
  fp8_max_cols_ = std::max(fp8_max_cols_, max_cols);
  if (!gemm_->has_fp8_kernels()) {
    precompile(fp8_linear_modules());
    gemm_->set_fp8_kernels(std::make_unique<Fp8Kernels>(
        [this](const std::string& entry, int tile) {
          return function(k_fp8_linear_source, entry, fp8_tile_defines(tile));
        },
        early_work_programmatic_launch(device(), options_.dependent_launch),
        device().compute_major * 10 + device().compute_minor >= 89));
  }
  reserve_fp8_scratch(std::max(step_capacity_tokens_, std::int64_t(1)));
}

void CudaBackend::reserve_fp8_scratch(std::int64_t m) {
  if (fp8_max_cols_ > 0 && gemm_ && gemm_->reserve_fp8(m, fp8_max_cols_)) ++graph_generation_;
}

void CudaBackend::linear_fp8(const Tensor& x, const Tensor& weight, const QuantizedWeight& scales, const Tensor* bias,
                             Tensor out) {
  expect_dtype(x, DType::bf16, "FP8 linear input");
  expect_dtype(weight, DType::f8_e4m3, "FP8 linear weight");
  expect_dtype(scales.scales, DType::f32, "FP8 linear scales");
  expect_dtype(out, DType::bf16, "FP8 linear output");
  if (x.cols != weight.cols || out.cols != weight.rows || out.rows != x.rows) {
    fail(ExitCode::failure, "internal: FP8 linear shapes [{}, {}] x [{}, {}]^T -> [{}, {}]", x.rows, x.cols,
         weight.rows, weight.cols, out.rows, out.cols);
  }
  const std::optional<Fp8Scaling> scaling = fp8_scaling(weight.cols, scales.block_rows, scales.block_cols);
  if (!gemm_ || !gemm_->has_fp8_kernels() || !scaling) {
    fail(ExitCode::failure, "internal: FP8 linear with blocks of {} x {} that the backend did not take",
         scales.block_rows, scales.block_cols);
  }
  if (bias) {
    expect_dtype(*bias, DType::f32, "FP8 linear bias");
    if (bias->rows * bias->cols != weight.rows) fail(ExitCode::failure, "internal: FP8 linear bias width {}", bias->cols);
  }
  if (x.rows == 0) return;
  if (*scaling == Fp8Scaling::blocks_128 && x.rows > k_fp8_mma_max_m && x.rows % 4 != 0) {
    // cuBLASLt's 1 x 128 activation scales take m % 4 == 0 only (H200, cuBLASLt 13.1): the rows
    // past the last multiple of 4 (at most 3) go to the skinny kernels, one more pass over the
    // weight. Decode steps run padded to power-of-two buckets, so this costs only prefill chunks.
    const std::int64_t head = x.rows / 4 * 4;
    linear_fp8(x.slice_rows(0, head), weight, scales, bias, out.slice_rows(0, head));
    linear_fp8(x.slice_rows(head, x.rows - head), weight, scales, bias, out.slice_rows(head, x.rows - head));
    return;
  }
  reserve_fp8_scratch(x.rows);  // grows only past what reserve_step sized, i.e. never inside a capture
  GemmOperands op{.x = address(x),
                  .x_stride = x.stride,
                  .w = address(weight),
                  .w_stride = weight.stride,
                  .w_dtype = DType::f8_e4m3,
                  .w_scales = address(scales.scales),
                  .w_scaling = *scaling,
                  .bias = bias ? address(*bias) : 0,
                  .out = address(out),
                  .out_stride = out.stride,
                  .out_dtype = DType::bf16,
                  .m = x.rows,
                  .n = weight.rows,
                  .k = weight.cols};
  const GemmResult result = gemm_->run(op, gemm_tuning_);
  if (result == GemmResult::bias_pending) add_bias(out, op.bias);
  if (result != GemmResult::unsupported) return;
  // Neither cuBLASLt nor a raced skinny kernel took it (operands it cannot read): the skinny
  // kernel's plainest variant, 8 rows at a time.
  GemmOperands one_row = op;
  one_row.m = 1;
  if (!Fp8Kernels::skinny_supports(one_row)) {
    fail(ExitCode::failure, "internal: no FP8 GEMM takes [{}, {}, {}] with these operands", op.m, op.n, op.k);
  }
  for (std::int64_t row = 0; row < op.m; row += k_fp8_skinny_max_m) {
    GemmOperands part = op;
    part.m = std::min<std::int64_t>(k_fp8_skinny_max_m, op.m - row);
    part.x = op.x + CUdeviceptr(row * op.x_stride * 2);
    part.out = op.out + CUdeviceptr(row * op.out_stride * 2);
    if (!gemm_->enqueue_fp8_skinny(part, 0)) fail(ExitCode::failure, "CUDA launch of the FP8 skinny GEMM failed");
  }
}

}  // namespace flare::helios::cuda
