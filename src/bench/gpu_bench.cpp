#include "bench/gpu_bench.h"

#include <cstdio>

#include "common/error.h"

#ifdef FLARE_HAVE_CUDA
#include "bench/cuda/cuda_bench.h"
#endif

namespace flare::bench {

BenchReport run_gpu_bench(const BenchModel& model, const BenchOptions& options, const BenchProgress& progress) {
#ifdef FLARE_HAVE_CUDA
  return cuda::run_cuda_bench(model, options, progress);
#else
  (void)model;
  (void)options;
  (void)progress;
  fail(ExitCode::failure, "no usable GPU: this build has no CUDA backend (the CUDA headers were not found at build time)");
#endif
}

int run_gpu_bench_and_report(const BenchModel& model, const BenchOptions& options) {
  const BenchProgress progress = [&](const BenchReport& report, std::string_view what) {
    std::fprintf(stderr, "  %.*s\n", int(what.size()), what.data());
    if (options.json_path) report_write_json(report, *options.json_path);
  };
  const BenchReport report = run_gpu_bench(model, options, progress);
  std::fputs(report_table(report).c_str(), stdout);
  std::fflush(stdout);
  if (options.json_path) {
    report_write_json(report, *options.json_path);
    std::fprintf(stderr, "wrote %s\n", options.json_path->string().c_str());
  }
  return 0;
}

}  // namespace flare::bench
