// A loaded model on a backend: its spec, its architecture (architecture.h), its weights, and the
// step executor running the architecture's forward program. The API the engine calls.
//
//   helios::cpu::CpuBackend backend;
//   auto model = model::Model::load(checkpoint_dir, backend);        // config.json + safetensors
//   helios::HistoryCaches cache = helios::history_allocate(backend, model->kv_cache_layout(n_pages, page_size));
//   std::vector<float> logits = model->forward(step, cache);         // [step.n_logit_rows(), vocab] F32
//   helios::sample_token(row_logits, params, history, index);        // helios/sampling.h
//
// Not thread-safe: one engine thread owns a Model, its backend and its caches.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "helios/backend.h"
#include "helios/history.h"
#include "helios/step_executor.h"
#include "model/architecture.h"
#include "model/spec.h"
#include "model/weight_table.h"

namespace flare::model {

class Model {
 public:
  static std::unique_ptr<Model> load(const std::filesystem::path& checkpoint_dir, helios::Backend& backend);
  Model(ModelSpec spec, helios::Backend& backend, LoadedWeights weights);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelSpec& spec() const { return spec_; }
  const Architecture& architecture() const { return architecture_; }
  const LoadedWeights& weights() const { return weights_; }
  helios::Backend& backend() { return backend_; }
  helios::StepExecutor& executor() { return *executor_; }
  const std::vector<helios::HistorySpec>& history() const { return history_; }
  // The KV caches of every history group (history.h): n_pages pages in each group, or n_pages[g]
  // in group g.
  helios::HistoryLayout kv_cache_layout(std::int32_t n_pages, std::int32_t page_size_tokens,
                                        helios::DType dtype = helios::DType::bf16) const;
  helios::HistoryLayout kv_cache_layout(std::span<const std::int32_t> n_pages, std::int32_t page_size_tokens,
                                        helios::DType dtype = helios::DType::bf16) const;
  std::vector<helios::HistoryGroup> history_groups() const { return helios::history_groups(history_); }

  // The executor's step API (step_executor.h).
  std::vector<float> forward(const helios::Step& step, helios::HistoryCaches& cache) { return executor_->forward(step, cache); }
  helios::Tensor forward_logits(const helios::Step& step, helios::HistoryCaches& cache) {
    return executor_->forward_logits(step, cache);
  }
  void reserve(std::int32_t max_tokens, std::int32_t max_logit_rows, std::int32_t max_rows, std::int32_t max_blocks = 0) {
    executor_->reserve(max_tokens, max_logit_rows, max_rows, max_blocks);
  }
  void download_logits(std::int32_t first_row, std::int32_t n_rows, std::span<float> out) {
    executor_->download_logits(first_row, n_rows, out);
  }

  // Graphs of the two shapes serving captures (step_shape.h): decode steps of n_rows rows, and a
  // one-row prefill chunk of n_tokens tokens wanting the logits of its last n_logits (0 or 1).
  // False when the backend has no graphs.
  // scratch_pages: each history group's scratch page (one: the same page id in every group).
  bool capture_decode_graph(std::int32_t n_rows, helios::HistoryCaches& cache, std::vector<std::int32_t> scratch_pages);
  bool capture_prefill_graph(std::int32_t n_tokens, std::int32_t n_logits, helios::HistoryCaches& cache,
                             std::vector<std::int32_t> scratch_pages);
  // Verify steps (speculative decoding): n_rows rows of n_tokens tokens (>= 2), every logits row wanted.
  bool capture_verify_graph(std::int32_t n_rows, std::int32_t n_tokens, helios::HistoryCaches& cache,
                            std::vector<std::int32_t> scratch_pages);
  // Captures `shape` with whichever of the three above it is.
  bool capture_graph(const helios::StepShape& shape, helios::HistoryCaches& cache,
                     std::vector<std::int32_t> scratch_pages);
  std::int32_t n_decode_graphs() const;
  std::int32_t n_verify_graphs() const;
  std::int32_t n_prefill_graphs() const;
  std::size_t n_decode_graph_nodes() const;   // operations recorded over every decode graph
  std::size_t n_prefill_graph_nodes() const;  // and over every other graph
  std::int64_t n_graph_replays() const { return executor_->n_graph_replays(); }
  std::int64_t n_verify_graph_replays() const { return executor_->n_verify_graph_replays(); }
  void drop_graphs() { executor_->drop_graphs(); }

 private:
  ModelSpec spec_;
  const Architecture& architecture_;
  helios::Backend& backend_;
  LoadedWeights weights_;
  std::vector<helios::HistorySpec> history_;
  std::unique_ptr<helios::StepProgram> program_;   // reads weights_
  std::unique_ptr<helios::StepExecutor> executor_;  // runs *program_
};

// Reads and converts every weight the spec's architecture declares from the checkpoint onto the
// backend, through the prepared layout (prepared_weights.h).
LoadedWeights weights_load(const ModelSpec& spec, const std::filesystem::path& checkpoint_dir, helios::Backend& backend);

}  // namespace flare::model
