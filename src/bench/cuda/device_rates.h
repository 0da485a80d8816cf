// The two device rates every other figure is a ratio against, measured in the same run:
// - copy bandwidth: cuMemcpyDtoDAsync of `copy_bytes` on the backend's stream, counting read +
//   write (2 x copy_bytes moved per copy);
// - BF16 GEMM throughput: Backend::linear on [m, k] x [n, k]^T -> [m, n] (whatever GEMM the backend
//   uses: its own kernel today, cuBLASLt when that lands), 2mnk FLOPs per call.
#pragma once

#include <cstdint>

#include "bench/bench_report.h"
#include "bench/cuda/device_fill.h"
#include "helios/cuda/cuda_backend.h"

namespace flare::bench::cuda {

void measure_copy_bandwidth(helios::cuda::CudaBackend& backend, std::uint64_t copy_bytes, const BenchOptions& options,
                            DeviceRates& rates);

void measure_gemm_throughput(helios::cuda::CudaBackend& backend, DeviceFill& fill, std::int64_t m, std::int64_t n,
                             std::int64_t k, const BenchOptions& options, DeviceRates& rates);

}  // namespace flare::bench::cuda
