// The CUDA backend's GEMMs through cuBLASLt and the skinny kernel (gemm_runner.h), kept apart from
// cuda_backend.cpp: the GEMM runner over the cuBLASLt the constructor loaded, the skinny kernel's
// entry points (from the modules the constructor compiled with the others) and the saved tuning
// table, running linear() on them, and the bias add for output types whose epilogue cannot take an
// F32 bias. Without cuBLASLt, linear() keeps the NVRTC kernel.
#include <algorithm>

#include "common/error.h"
#include "helios/cuda/cuda_backend.h"

namespace flare::helios::cuda {

void CudaBackend::init_gemm(const std::filesystem::path& kernel_cache_dir) {
  if (!cublaslt_) return;  // the NVRTC kernel serves; gemm_engine_name() says so
  // Loaded now, not on first use, since first use may be inside a graph capture (and so that an
  // export's kernel images include them).
  auto skinny = std::make_unique<SkinnyGemm>(
      [this](const std::string& entry, int tile) {
        return function(k_skinny_gemm_source, entry, skinny_tile_defines(tile));
      },
      skinny_programmatic_launch(device()));
  gemm_ = std::make_unique<GemmRunner>(*cublaslt_, device().arch(), stream_, std::move(skinny));
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

bool CudaBackend::linear_cublaslt(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out) {
  if (!gemm_ || x.rows == 0) return false;
  const GemmOperands op{.x = CUdeviceptr(x.data),
                        .x_stride = x.stride,
                        .w = CUdeviceptr(weight.data),
                        .w_stride = weight.stride,
                        .bias = bias ? CUdeviceptr(bias->data) : 0,
                        .out = CUdeviceptr(out.data),
                        .out_stride = out.stride,
                        .out_dtype = out.dtype,
                        .m = x.rows,
                        .n = weight.rows,
                        .k = weight.cols};
  const GemmResult result = gemm_->run(op, gemm_tuning_);
  if (result == GemmResult::unsupported) return false;
  if (result == GemmResult::bias_pending) {
    const bool to_f32 = out.dtype == DType::f32;
    CUdeviceptr out_ptr = op.out, bias_ptr = op.bias;
    long long out_stride = out.stride;
    int cols = int(out.cols);
    launch(function("bias_add", to_f32 ? "flare_bias_add_f32" : "flare_bias_add_bf16"),
           {.grid_x = std::min(unsigned((cols + 255) / 256), 64u), .grid_y = unsigned(out.rows), .block_x = 256},
           {&out_ptr, &out_stride, &bias_ptr, &cols}, "bias_add");
  }
  return true;
}

}  // namespace flare::helios::cuda
