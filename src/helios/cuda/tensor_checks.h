// The CUDA backend's checks of the tensors an operation is handed (a mismatch is an internal
// error: the model builds them) and their device addresses, shared by the operation files.
#pragma once

#include <cstdint>

#include "common/error.h"
#include "helios/backend.h"
#include "helios/cuda/driver.h"

namespace flare::helios::cuda {

inline CUdeviceptr address(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }
inline CUdeviceptr address(const Tensor& t) { return address(t.data); }

inline void expect_dtype(const Tensor& t, DType dtype, const char* what) {
  if (t.dtype != dtype) {
    fail(ExitCode::failure, "internal: cuda {} expects {} but got {}", what, dtype_name(dtype), dtype_name(t.dtype));
  }
}

inline void expect_bf16(const Tensor& t, const char* what) { expect_dtype(t, DType::bf16, what); }

inline void expect_shape(const Tensor& t, std::int64_t rows, std::int64_t cols, const char* what) {
  if (t.rows != rows || t.cols != cols) {
    fail(ExitCode::failure, "internal: cuda {} is [{}, {}], expected [{}, {}]", what, t.rows, t.cols, rows, cols);
  }
}

}  // namespace flare::helios::cuda
