// CPU matrix products: out[m, n] = x[m, k] @ w[n, k]^T (+ bias[n]), x and out F32, w BF16, FP32
// accumulation. AVX2+FMA kernels when the processor has them (checked at run time), a scalar loop
// otherwise; both threaded over blocks of output columns so that a block of weight rows stays in
// cache while every row of x passes over it.
#pragma once

#include <cstdint>

#include "helios/cpu/thread_pool.h"

namespace flare::helios::cpu {

struct GemmArgs {
  const float* x = nullptr;     // [m, k], row stride x_stride
  std::int64_t x_stride = 0;
  const std::uint16_t* w = nullptr;  // [n, k] bf16, contiguous rows
  const float* bias = nullptr;  // [n] or null
  float* out = nullptr;         // [m, n], row stride out_stride
  std::int64_t out_stride = 0;
  std::int64_t m = 0, n = 0, k = 0;
};

void gemm_bf16(ThreadPool& pool, const GemmArgs& args);
bool gemm_has_avx2();
// For tests: force the scalar path.
void gemm_bf16_scalar(const GemmArgs& args, std::int64_t n_begin, std::int64_t n_end);

}  // namespace flare::helios::cpu
