// What a GPU benchmark run measures (shared by cuda_forward_bench and `ignition bench`), and the
// argument parser of the cuda_forward_bench binary. Checks are usage errors (exit 2) that name the
// option, so a mistyped run fails before a model is built on the device.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "helios/cuda/cuda_backend_options.h"
#include "helios/dtype.h"

namespace flare::bench {

struct BenchOptions {
  int gpu = 0;                                             // device ordinal (CUDA enumeration)
  std::vector<std::int32_t> batches = {1, 2, 4, 8, 16, 32, 64};  // decode buckets (rows per step)
  std::vector<std::int32_t> contexts = {1024};             // tokens already cached per decode row
  std::int32_t prefill_tokens = 2048;                      // one prompt row; 0 skips prefill
  std::vector<helios::DType> kv_dtypes = {helios::DType::bf16};  // KV page dtypes (bf16, f8_e4m3)
  helios::DType weights = helios::DType::bf16;            // random projection matrices: bf16, or f8_e4m3
                                                          // with 128 x 128 block scales
  std::int32_t verify_tokens = 0;                          // also a verify step per bucket: rows of this
                                                           // many tokens (1 + drafts, every logits row)
                                                           // at the same context; 0 skips
  std::int32_t attention_batch = 32;                       // decode attention alone: rows ...
  std::int32_t attention_context = 8192;                   // ... of this many cached tokens; 0 skips
  std::int32_t warmup = 3;                                 // untimed runs before each measurement
  std::int32_t repetitions = 10;                           // timed runs (median and quartiles)
  bool breakdown = true;                                   // per-operation table of one decode step
  std::int32_t profile_batch = 0;                          // one decode step of this bucket inside a
                                                           // profiler range (ncu); 0: none
  std::uint64_t seed = 1;                                  // random weights, KV and tokens
  // --rounds: complete speculative rounds instead of steps (the spec's GPU graph latency benchmark):
  // for each batch x context and each of `seeds`, a round verifies verify_tokens tokens a row (the
  // pending token and its drafts) through the verify graph, samples every position on the device
  // and accepts drafts; warmup rounds, then repetitions timed rounds. Prefill, decode buckets and
  // attention alone are not run.
  bool rounds = false;
  std::vector<std::uint64_t> seeds = {0, 1, 2};             // rounds: input and sampling seeds
  std::optional<std::filesystem::path> json_path;          // --json / --output
  std::optional<std::filesystem::path> kernel_cache;       // default: [paths].kernel_cache default
  // The CUDA backend's measurement switches (--no-stream-gemm, --dependent-launch, --gemm-race-log);
  // the defaults are what flare run serves with. The sampler's switches are for tests only.
  helios::cuda::CudaBackendOptions backend;
};

// "1,2,4": distinct positive integers (order kept); `option` names the flag in errors.
std::vector<std::int32_t> parse_positive_list(std::string_view text, std::string_view option);
// "bf16", "fp8" (f8_e4m3), or a comma list of them.
std::vector<helios::DType> parse_kv_dtypes(std::string_view text);
// "early-work", "all" or "off" (--dependent-launch).
helios::cuda::DependentLaunch parse_dependent_launch(std::string_view text);
// "0,1,2": distinct non-negative integers (order kept); `option` names the flag in errors.
std::vector<std::uint64_t> parse_seed_list(std::string_view text, std::string_view option);
// The spec's defaults for a rounds run, for what the command line left unset: batches 1,2,4,
// contexts 512,2048,8192,16384, verify width 8, 5 warm-up and 20 timed rounds.
void apply_round_defaults(BenchOptions& options, bool batches_set, bool contexts_set, bool width_set, bool warmup_set,
                          bool repetitions_set);
// Range checks shared by both front ends.
void bench_options_validate(const BenchOptions& options);

// cuda_forward_bench's command line (argv without the program name).
struct BenchArgs {
  std::string shape = "llama-3.1-8b";  // --shape
  BenchOptions options;
  bool help = false;
};
BenchArgs bench_args_parse(const std::vector<std::string>& args);
std::string bench_args_usage();

}  // namespace flare::bench
