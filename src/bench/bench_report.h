// The results of a GPU benchmark run as plain data, the human table and the JSON document.
// Conventions (printed with the table and recorded in the JSON):
// - Copy bandwidth counts read + write bytes: a cuMemcpyDtoDAsync of N bytes moves 2N.
// - A decode step's bandwidth bound reads every weight once (every layer matrix, the norms and the
//   output head; the embedding table is not counted, a step reads only its rows) at copy bandwidth.
// - A bound in the per-operation table is max(bytes moved / copy bandwidth, FLOPs / GEMM rate).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bench/bench_options.h"

namespace flare::bench {

// Median and quartiles of timed runs, each bracketed by CUDA events on the backend's stream.
struct Timing {
  std::vector<double> samples_ms;
  double median_ms = 0, p25_ms = 0, p75_ms = 0, min_ms = 0;
  double host_enqueue_ms = 0;  // median host time to enqueue one run (launch-bound when ~ median_ms)
};
Timing timing_of(std::vector<double> samples_ms, std::vector<double> host_ms = {});

struct DeviceRates {
  double copy_bytes = 0;       // bytes of one copy (moved: twice that)
  Timing copy;
  double copy_gbs = 0;         // (read + write) GB/s
  std::int64_t gemm_m = 0, gemm_n = 0, gemm_k = 0;
  Timing gemm;
  double gemm_tflops = 0;      // 2mnk / time, through Backend::linear
};

struct PrefillResult {
  std::int32_t tokens = 0;
  Timing timing;
  double flops = 0;            // linear layers (2 x params x tokens) + causal attention
  double tflops = 0;
  double ratio_to_gemm = 0;    // tflops / measured GEMM throughput
};

struct DecodeResult {
  std::int32_t batch = 0, context = 0;
  std::string kv_dtype;
  std::string skipped;         // non-empty: why it did not run
  std::string runner;          // "graph" (a captured CUDA graph replayed) or "eager"
  Timing timing;               // the runner's
  double tokens_per_s = 0;     // batch / step time
  Timing eager;                // the same step enqueued operation by operation
  // --verify-tokens: the step of the same rows and context verifying verify_tokens tokens a row
  // (its verify graph where the backend has graphs), and its time over the decode step's.
  std::int32_t verify_tokens = 0;
  Timing verify;
  double verify_ratio = 0;
};

struct AttentionResult {
  std::int32_t batch = 0, context = 0;
  std::string kv_dtype;
  std::string skipped;
  Timing timing;
  double kv_bytes = 0;         // K and V bytes read by one call (every row's cached positions)
  double gbs = 0;
  double ratio_to_copy = 0;
};

struct BreakdownRow {
  std::string category;        // "gemm qkv", "attention", "norms", "lm_head", ...
  std::int32_t n_calls = 0;
  double ms = 0;               // per step (mean over the timed steps)
  double bytes = 0, flops = 0; // per step
  double bound_ms = 0;
  std::string bound_by;        // "memory", "compute", or "" (host work)
};

struct Breakdown {
  std::int32_t batch = 0, context = 0;
  double step_ms = 0;          // the same step timed whole (no events between operations)
  double sum_ms = 0;           // sum of the rows (events between operations add a little)
  double bound_ms = 0;         // sum of the rows' bounds
  std::vector<BreakdownRow> rows;
};

// --rounds: one batch x context case of complete speculative rounds (bench_options.h), timed per
// seed; its median and quartiles over every seed's samples.
struct RoundCase {
  std::int32_t batch = 0, context = 0, width = 0;  // width: tokens a row verifies (pending + drafts)
  std::vector<std::uint64_t> seeds;                // the seeds measured, in order
  std::vector<Timing> by_seed;                     // their timed rounds
  Timing timing;                                   // every seed's samples together
  Timing decode;                                   // the decode step of the same rows and context
  double round_over_decode = 0;                    // timing.median_ms / decode.median_ms
  double accepted_per_round = 0;                   // drafts accepted a row a round (random drafts)
  bool complete = false;                           // every seed measured
  std::string failure;                             // why not, when it is not
};

struct Target {
  std::string name;
  double measured = 0, target = 0;
  bool higher_is_better = true;
  bool met() const { return higher_is_better ? measured >= target : measured <= target; }
};

struct BenchReport {
  std::string device_name, device_arch;
  std::uint64_t device_bytes = 0;
  std::string model_name, model_source;
  std::string step_runner = "eager";   // decode steps: "eager" or "CUDA graphs" (eager also timed)
  std::int64_t n_parameters = 0;
  double weight_bytes_per_token = 0;  // see the conventions above
  BenchOptions options;
  DeviceRates rates;
  std::vector<PrefillResult> prefill;  // zero or one
  std::vector<DecodeResult> decode;
  std::vector<AttentionResult> attention;
  std::vector<Breakdown> breakdowns;
  std::vector<RoundCase> rounds;       // --rounds
  // The mean of the cases' medians, equal weights (lower is better); 0 unless every case completed.
  double rounds_aggregate_ms = 0;
  // Derived (0 when the needed buckets did not run):
  double batch1_tokens_per_s = 0, batch1_bound_tokens_per_s = 0, batch1_ratio = 0;
  double batch64_over_batch1 = 0;
  std::vector<Target> targets;
  std::string status = "complete";     // "incomplete" when a part failed
  std::vector<std::string> notes;      // skipped parts and why
};

// Fills the derived figures and the performance targets (DESIGN / issue 6) from the results.
void report_derive(BenchReport& report);

std::string report_table(const BenchReport& report);
nlohmann::json report_json(const BenchReport& report);
// Writes the JSON atomically (temporary file + rename); throws flare::Error on I/O failure.
void report_write_json(const BenchReport& report, const std::filesystem::path& path);

}  // namespace flare::bench
