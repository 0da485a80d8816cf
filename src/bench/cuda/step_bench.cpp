#include "bench/cuda/step_bench.h"

#include <algorithm>
#include <cmath>

#include "bench/bench_steps.h"
#include "bench/model_costs.h"
#include "common/error.h"
#include "helios/cuda/driver.h"

namespace flare::bench::cuda {
namespace {

using helios::DType;

constexpr int k_breakdown_steps = 3;

std::string kv_name(DType dtype) { return dtype == DType::f8_e4m3 ? "fp8" : std::string(helios::dtype_name(dtype)); }

void fill_cache(DeviceFill& fill, const helios::KvCache& cache, std::uint64_t seed) {
  const std::size_t bytes = cache.layout.size_bytes();
  if (cache.layout.dtype == DType::f8_e4m3) {
    fill.f8_e4m3(cache.storage->data(), bytes, seed);
  } else {
    fill.bf16(cache.storage->data(), bytes / 2, seed, 1.0f);
  }
}

void fill_cache(DeviceFill& fill, const helios::HistoryCaches& caches, std::uint64_t seed) {
  for (const helios::KvCache& cache : caches.groups) fill_cache(fill, cache, seed + std::uint64_t(cache.group));
}

// A failed case leaves queued work behind; wait for it so the next case starts clean.
std::string failure_text(helios::cuda::CudaBackend& backend, const Error& e) {
  try {
    backend.synchronize();
  } catch (const Error&) {
  }
  return e.what();
}

}  // namespace

PrefillResult StepBench::prefill() {
  const model::ModelSpec& spec = model.spec();
  PrefillResult p;
  p.tokens = options.prefill_tokens;
  const StepShape shape{1, p.tokens, 0, page_size_tokens};
  helios::HistoryCaches cache =
      helios::history_allocate(timing, model.kv_cache_layout(shape.n_pages(), page_size_tokens, DType::bf16));
  fill_cache(fill, cache, options.seed + 21);
  const helios::Step step = uniform_step(shape, spec.vocab_size, options.seed + 22);
  // A prefill step is long (tens of ms and more): fewer runs give the same precision.
  p.timing = time_runs(backend().stream(), std::min(options.warmup, 1), std::min(options.repetitions, 5),
                       [&] { run(step, cache); });
  p.flops = prefill_flops(spec, p.tokens, 1);
  p.tflops = p.flops / (p.timing.median_ms * 1e-3) / 1e12;
  p.ratio_to_gemm = rates.gemm_tflops > 0 ? p.tflops / rates.gemm_tflops : 0;
  return p;
}

void StepBench::decode(std::int32_t context, DType kv_dtype, BenchReport& report, bool breakdowns) {
  const model::ModelSpec& spec = model.spec();
  const std::int32_t page = page_size_tokens;
  const std::int32_t max_batch = *std::max_element(options.batches.begin(), options.batches.end());
  helios::HistoryCaches cache;
  std::int32_t scratch_page = 0;
  std::string cache_failure;
  try {
    const StepShape largest{max_batch, std::max(1, options.verify_tokens), context, page};
    scratch_page = largest.n_pages();  // one spare page after the rows' pages
    cache = helios::history_allocate(timing, model.kv_cache_layout(largest.n_pages() + 1, page, kv_dtype));
    fill_cache(fill, cache, options.seed + 31);
  } catch (const Error& e) {
    cache_failure = failure_text(backend(), e);
  }
  for (const std::int32_t batch : options.batches) {
    DecodeResult d;
    d.batch = batch;
    d.context = context;
    d.kv_dtype = kv_name(kv_dtype);
    const helios::Step step = uniform_step({batch, 1, context, page}, spec.vocab_size, options.seed + std::uint64_t(batch));
    if (!cache_failure.empty()) {
      d.skipped = cache_failure;
    } else {
      try {
        model.drop_graphs();
        d.eager = time_runs(backend().stream(), options.warmup, options.repetitions, [&] { run(step, cache); });
        d.runner = "eager";
        d.timing = d.eager;
        if (graphs && model.capture_decode_graph(batch, cache, {scratch_page})) {
          d.runner = "graph";
          d.timing = time_runs(backend().stream(), options.warmup, options.repetitions, [&] { run(step, cache); });
        }
        d.tokens_per_s = batch / (d.timing.median_ms * 1e-3);
        if (batch == options.profile_batch) profile(step, cache);
        if (options.verify_tokens >= 2) {
          // The verify step of the same rows: verify_tokens new tokens a row after `context` cached
          // ones, every logits row wanted (as the engine's verify rows), through its verify graph.
          const std::int32_t n = options.verify_tokens;
          helios::Step verify =
              uniform_step({batch, n, context, page}, spec.vocab_size, options.seed + 100 + std::uint64_t(batch));
          for (helios::StepRow& row : verify.rows) row.n_logits = n;
          if (graphs) model.capture_verify_graph(batch, n, cache, {scratch_page});
          d.verify_tokens = n;
          d.verify = time_runs(backend().stream(), options.warmup, options.repetitions, [&] { run(verify, cache); });
          d.verify_ratio = d.verify.median_ms / d.timing.median_ms;
        }
      } catch (const Error& e) {
        d.skipped = failure_text(backend(), e);
      }
    }
    report.decode.push_back(d);
    if (breakdowns && d.skipped.empty() && (batch == 1 || batch == max_batch)) {
      report.breakdowns.push_back(breakdown(step, cache, context, d.eager.median_ms));
    }
  }
  model.drop_graphs();  // they name this cache, freed on return
}

void StepBench::profile(const helios::Step& step, helios::HistoryCaches& cache) {
  const helios::cuda::Driver& d = helios::cuda::driver();
  if (!d.profiler_start || !d.profiler_stop) fail(ExitCode::failure, "--profile-batch: the CUDA driver has no cuProfilerStart");
  backend().synchronize();
  helios::cuda::check(d.profiler_start(), "cuProfilerStart");
  run(step, cache);
  backend().synchronize();
  helios::cuda::check(d.profiler_stop(), "cuProfilerStop");
}

Breakdown StepBench::breakdown(const helios::Step& step, helios::HistoryCaches& cache, std::int32_t context,
                             double step_ms) {
  Breakdown b;
  b.batch = step.n_rows();
  b.context = context;
  b.step_ms = step_ms;  // the eager step's
  model.drop_graphs();  // operation by operation
  timing.set_recording(true);
  for (int i = 0; i < k_breakdown_steps; ++i) run(step, cache);
  timing.set_recording(false);
  b.rows = timing.collect(rates);
  for (const BreakdownRow& row : b.rows) {
    b.sum_ms += row.ms;
    b.bound_ms += row.bound_ms;
  }
  return b;
}

AttentionResult StepBench::attention(DType kv_dtype) {
  const model::ModelSpec& spec = model.spec();
  AttentionResult a;
  a.batch = options.attention_batch;
  a.context = options.attention_context;
  a.kv_dtype = kv_name(kv_dtype);
  try {
    const StepShape shape{a.batch, 1, a.context - 1, page_size_tokens};  // each row attends `context` positions
    const helios::KvCacheLayout layout{1, shape.n_pages(), page_size_tokens, spec.n_kv_heads, spec.head_dim, kv_dtype};
    helios::KvCache cache = backend().allocate_kv_cache(layout);
    fill_cache(fill, cache, options.seed + 41);
    auto q_buf = backend().allocate(std::size_t(a.batch) * std::size_t(spec.q_width()) * 2);
    auto out_buf = backend().allocate(std::size_t(a.batch) * std::size_t(spec.q_width()) * 2);
    const helios::Tensor q = helios::Tensor::of(*q_buf, DType::bf16, a.batch, spec.q_width());
    const helios::Tensor out = helios::Tensor::of(*out_buf, DType::bf16, a.batch, spec.q_width());
    fill.tensor(q, options.seed + 42, 1.0f);
    const helios::Step step = uniform_step(shape, spec.vocab_size, options.seed + 43);
    backend().begin_step(step, cache);
    helios::AttentionParams params;
    params.layer = 0;
    params.n_heads = spec.n_heads;
    params.n_kv_heads = spec.n_kv_heads;
    params.head_dim = spec.head_dim;
    params.scale = spec.softmax_scale();
    params.sliding_window = spec.layers[0].sliding_window;
    a.timing = time_runs(backend().stream(), options.warmup, options.repetitions,
                         [&] { backend().attention(cache, q, params, out); });
    a.kv_bytes = double(a.batch) * kv_bytes_read(spec, 0, a.context, kv_dtype);
    a.gbs = a.kv_bytes / (a.timing.median_ms * 1e-3) / 1e9;
    a.ratio_to_copy = rates.copy_gbs > 0 ? a.gbs / rates.copy_gbs : 0;
  } catch (const Error& e) {
    a.skipped = failure_text(backend(), e);
  }
  return a;
}

}  // namespace flare::bench::cuda
