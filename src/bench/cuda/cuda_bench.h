// One GPU benchmark run on the CUDA backend: device rates, then the model (random weights on the
// device, or a checkpoint's), then prefill, decode buckets, attention alone and the breakdowns.
#pragma once

#include "bench/gpu_bench.h"

namespace flare::bench::cuda {

BenchReport run_cuda_bench(const BenchModel& model, const BenchOptions& options, const BenchProgress& progress);

}  // namespace flare::bench::cuda
