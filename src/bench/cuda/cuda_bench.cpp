#include "bench/cuda/cuda_bench.h"

#include <algorithm>

#include <fmt/format.h>

#include "bench/bench_steps.h"
#include "bench/cuda/device_fill.h"
#include "bench/cuda/device_rates.h"
#include "bench/cuda/random_weights.h"
#include "bench/cuda/round_bench.h"
#include "bench/cuda/step_bench.h"
#include "bench/cuda/timing_backend.h"
#include "bench/model_costs.h"
#include "bench/round_report.h"
#include "common/config.h"
#include "common/error.h"
#include "helios/cuda/nvrtc.h"

namespace flare::bench::cuda {
namespace {

namespace hc = helios::cuda;

constexpr std::uint64_t k_copy_bytes = std::uint64_t(1) << 30;
constexpr std::int64_t k_gemm_size = 8192;

// Throws flare::Error (exit 1) naming what is missing for a run on device `gpu`.
void require_gpu(int gpu) {
  std::string reason;
  if (!hc::driver_available(&reason)) fail(ExitCode::failure, "no usable GPU: {}", reason);
  const int n = hc::device_count();
  if (n == 0) fail(ExitCode::failure, "no usable GPU: the driver sees no CUDA device");
  if (gpu >= n) fail_usage("GPU {} does not exist; {} GPU{} visible (0-{})", gpu, n, n == 1 ? " is" : "s are", n - 1);
  if (!hc::Nvrtc::try_load(hc::k_default_cuda_root, &reason)) fail(ExitCode::failure, "no usable GPU: {}", reason);
}

std::unique_ptr<model::Model> load_model(const BenchModel& m, TimingBackend& timing, DeviceFill& fill,
                                         std::uint64_t seed, helios::DType matrices) {
  if (bench_model_random_weights(m)) {
    return std::make_unique<model::Model>(m.spec, timing, random_weights(m.spec, timing, fill, seed, matrices));
  }
  return model::Model::load(m.checkpoint_dir, timing);
}

}  // namespace

BenchReport run_cuda_bench(const BenchModel& m, const BenchOptions& options, const BenchProgress& progress) {
  bench_options_validate(options);
  require_gpu(options.gpu);
  BenchReport report;
  report.options = options;
  report.status = "incomplete";
  report.model_name = m.name;
  report.model_source = m.source;
  report.n_parameters = m.spec.n_parameters();
  report.weight_bytes_per_token = decode_weight_bytes(m.spec, bench_model_random_weights(m) ? options.weights : helios::DType::bf16);

  hc::CudaBackend backend(options.gpu, options.kernel_cache.value_or(Config{}.kernel_cache()),
                          std::filesystem::path(hc::k_default_cuda_root), options.backend);
  report.device_name = backend.device().name;
  report.device_arch = backend.device().arch();
  report.device_bytes = backend.device().total_bytes;
  DeviceFill fill(backend);
  progress(report, fmt::format("GPU {}: {} ({}); model {}: {}", options.gpu, report.device_name, report.device_arch, m.name,
                               m.source));

  measure_copy_bandwidth(backend, k_copy_bytes, options, report.rates);
  measure_gemm_throughput(backend, fill, k_gemm_size, k_gemm_size, k_gemm_size, options, report.rates);
  progress(report, fmt::format("device rates: copy {:.0f} GB/s, BF16 GEMM {:.1f} TFLOP/s", report.rates.copy_gbs,
                               report.rates.gemm_tflops));

  TimingBackend timing(backend);
  const std::unique_ptr<model::Model> model = load_model(m, timing, fill, options.seed, options.weights);
  timing.name_weights(model->weights().roles_by_address(model->architecture().weight_table(model->spec())));
  const std::int32_t max_batch = *std::max_element(options.batches.begin(), options.batches.end());
  // Fixed buffer addresses for every step of the run (what captured graphs need).
  const std::int32_t max_context = *std::max_element(options.contexts.begin(), options.contexts.end());
  const std::int32_t row_tokens = std::max(1, options.verify_tokens);  // a verify step's rows
  const std::int32_t max_blocks =
      std::max(StepShape{max_batch, row_tokens, max_context, m.page_size_tokens}.n_pages(),
               StepShape{1, std::max(options.prefill_tokens, 1), 0, m.page_size_tokens}.n_pages());
  model->reserve(std::max(options.prefill_tokens, max_batch * row_tokens), max_batch * row_tokens, max_batch,
                 max_blocks);
  progress(report, "model ready");

  if (options.rounds) {
    report.step_runner = timing.supports_graphs() ? "CUDA graphs" : "eager";
    measure_rounds(timing, *model, fill, options, m.page_size_tokens, report,
                   [&](std::string_view what) { progress(report, what); });
    for (const RoundCase& c : report.rounds) {
      if (!c.failure.empty())
        report.notes.push_back(fmt::format("rounds batch {} context {}: {}", c.batch, c.context, c.failure));
    }
    rounds_derive(report);
    report.status = report.rounds_aggregate_ms > 0 ? "complete" : "incomplete";
    return report;
  }
  StepBench steps{timing, *model, fill, options, report.rates, m.page_size_tokens,
                  [&](const helios::Step& step, helios::HistoryCaches& cache) { model->forward_logits(step, cache); },
                  timing.supports_graphs()};
  report.step_runner = steps.graphs ? "CUDA graphs" : "eager";
  if (options.prefill_tokens > 0) {
    try {
      report.prefill.push_back(steps.prefill());
      progress(report, fmt::format("prefill {} tokens: {:.3f} ms", options.prefill_tokens,
                                   report.prefill.back().timing.median_ms));
    } catch (const Error& e) {
      report.notes.push_back(fmt::format("prefill of {} tokens failed: {}", options.prefill_tokens, e.what()));
    }
  }
  for (const helios::DType kv_dtype : options.kv_dtypes) {
    for (const std::int32_t context : options.contexts) {
      const bool breakdowns = options.breakdown && kv_dtype == helios::DType::bf16 && context == options.contexts.front();
      steps.decode(context, kv_dtype, report, breakdowns);
      progress(report, fmt::format("decode buckets at context {} ({} KV)", context, helios::dtype_name(kv_dtype)));
    }
  }
  if (options.attention_context > 0) {
    for (const helios::DType kv_dtype : options.kv_dtypes) {
      report.attention.push_back(steps.attention(kv_dtype));
      progress(report, fmt::format("attention alone ({} KV)", helios::dtype_name(kv_dtype)));
    }
  }
  for (const DecodeResult& d : report.decode) {
    if (!d.skipped.empty()) report.notes.push_back(fmt::format("decode batch {} context {} {} KV skipped: {}", d.batch,
                                                               d.context, d.kv_dtype, d.skipped));
  }
  for (const AttentionResult& a : report.attention) {
    if (!a.skipped.empty()) report.notes.push_back(fmt::format("attention {} KV skipped: {}", a.kv_dtype, a.skipped));
  }
  report_derive(report);
  report.status = "complete";
  return report;
}

}  // namespace flare::bench::cuda
