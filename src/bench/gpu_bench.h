// The GPU benchmark's entry point, shared by cuda_forward_bench and `ignition bench`: runs the
// measurements on one GPU, prints progress and the table, and keeps the JSON report up to date
// (status "incomplete" until the run ends, so a killed run leaves its partial results).
#pragma once

#include <functional>
#include <string_view>

#include "bench/bench_options.h"
#include "bench/bench_report.h"
#include "bench/shape_configs.h"

namespace flare::bench {

// Called after each part with the report so far and one line saying what finished.
using BenchProgress = std::function<void(const BenchReport& report, std::string_view what)>;

// Runs every measurement; throws flare::Error with exit code 1 when this build has no CUDA
// backend or the machine has no usable GPU (driver, device or NVRTC missing).
BenchReport run_gpu_bench(const BenchModel& model, const BenchOptions& options, const BenchProgress& progress);

// run_gpu_bench with progress lines on stderr, the table on stdout and the JSON at
// options.json_path (rewritten after each part). Returns the exit status (0).
int run_gpu_bench_and_report(const BenchModel& model, const BenchOptions& options);

}  // namespace flare::bench
