// GPU forward-pass benchmark: prefill and decode step times per batch bucket of a dense model on
// one GPU, against the device's measured copy bandwidth and BF16 GEMM throughput, with decode
// attention alone and where one decode step's time goes. The measuring code is the flare_bench
// library (src/bench/), which `ignition bench` runs too.
//   cuda_forward_bench --shape llama-3.1-8b --buckets 1,2,4,8,16,32,64 --prefill 2048
//                      --context 1024 --kv-dtype bf16,fp8 --json /tmp/bench.json
// Exits 1 with a message on a machine without a usable GPU, 2 on a usage error.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/gpu_bench.h"
#include "bench/shape_configs.h"
#include "common/error.h"

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const flare::bench::BenchArgs parsed = flare::bench::bench_args_parse(args);
    if (parsed.help) {
      std::fputs(flare::bench::bench_args_usage().c_str(), stdout);
      return 0;
    }
    const flare::bench::BenchModel model = flare::bench::bench_model_resolve(parsed.shape);
    return flare::bench::run_gpu_bench_and_report(model, parsed.options);
  } catch (const flare::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_status();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
