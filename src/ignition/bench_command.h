// `ignition bench [MODEL]`: the GPU benchmark (src/bench/) of a model's prefill and decode steps
// on one GPU. MODEL resolves as for export; a recipe alias whose checkpoint is not present runs
// random weights of the recipe's embedded config shape (bench/configs/) and says so.
#pragma once

#include <optional>
#include <string>

#include "bench/bench_options.h"
#include "bench/shape_configs.h"
#include "common/config.h"

namespace CLI {
class App;
}

namespace flare::ignition {

struct BenchCommandOptions {
  std::string model;                            // MODEL (default: [defaults] model, then llama-3.1-8b)
  std::optional<std::string> gpus;              // --gpus: one index
  std::optional<std::string> batches, contexts, kv_dtype;
  std::optional<std::string> dependent_launch;  // --dependent-launch
  std::optional<std::string> seeds;             // --seeds (rounds)
  std::optional<int> verify_width, warmup, repetitions;  // unset: the defaults of the run's kind
  std::optional<std::filesystem::path> config;  // --config
  bench::BenchOptions bench;                    // the rest, set directly by the flags
};

inline constexpr const char* k_bench_default_model = "llama-3.1-8b";

// The benchmark options the flags describe (lists parsed, one GPU); usage errors name the flag.
bench::BenchOptions bench_options_from(const BenchCommandOptions& options);

// What MODEL benchmarks: a checkpoint's real weights, or random weights of the recipe's shape
// when `selector` is an alias whose checkpoint is absent. Unknown models are usage errors.
bench::BenchModel resolve_bench_model(const std::string& selector, const Config& config);

int run_bench(const BenchCommandOptions& options);

void add_bench_command(CLI::App& app);

}  // namespace flare::ignition
