// The timed parts of a GPU benchmark run: a prefill step, decode steps per batch bucket, decode
// attention alone, and the per-operation breakdown of a decode step. Steps run through
// Model::forward_logits (logits stay on the device, nothing is sampled), as the engine runs them:
// a decode bucket is timed eagerly, then with its CUDA graph captured (Model::capture_decode_graph),
// which forward_logits replays; the per-operation table runs eagerly.
#pragma once

#include <functional>

#include "bench/bench_report.h"
#include "bench/cuda/device_fill.h"
#include "bench/cuda/timing_backend.h"
#include "model/model.h"

namespace flare::bench::cuda {

// Enqueues one forward step on the backend's stream without waiting for it.
using StepRunner = std::function<void(const helios::Step& step, helios::HistoryCaches& cache)>;

struct StepBench {
  TimingBackend& timing;  // the model's backend (forwards to the CUDA backend)
  model::Model& model;
  DeviceFill& fill;
  const BenchOptions& options;
  const DeviceRates& rates;
  std::int32_t page_size_tokens = 16;  // KV page size (the recipe's)
  StepRunner run;         // default: Model::forward_logits
  bool graphs = true;     // capture each decode bucket's CUDA graph when the backend has graphs

  helios::cuda::CudaBackend& backend() { return timing.inner(); }

  // One prompt row of options.prefill_tokens from position 0 (bf16 KV).
  PrefillResult prefill();
  // Every batch bucket at `context` cached tokens per row with `kv_dtype` pages (filled with random
  // values; one spare page for graph captures); a bucket the backend rejects is recorded as
  // skipped with its message. With `breakdowns`, also times batch 1 and the largest bucket
  // operation by operation.
  void decode(std::int32_t context, helios::DType kv_dtype, BenchReport& report, bool breakdowns);
  // options.attention_batch rows attending options.attention_context positions each, one layer.
  AttentionResult attention(helios::DType kv_dtype);

 private:
  Breakdown breakdown(const helios::Step& step, helios::HistoryCaches& cache, std::int32_t context, double step_ms);
  // One run of `step` (the captured graph where there is one) between cuProfilerStart and
  // cuProfilerStop: what `ncu --profile-from-start off` records.
  void profile(const helios::Step& step, helios::HistoryCaches& cache);
};

}  // namespace flare::bench::cuda
