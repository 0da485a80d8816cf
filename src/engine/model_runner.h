// ModelStepRunner: the StepRunner over a real model (src/model) on a backend (src/helios). It owns
// the backend, the loaded model and the KV cache sized to the engine's page pool; run() performs the
// step's copy-on-write page copies and the forward pass, samples the rows the scheduler's plan
// leaves to the backend where the logits are, and downloads only the rows the host needs. Owned
// and called by the engine thread only.
#pragma once

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_options.h"
#include "helios/backend.h"
#include "model/model.h"

namespace flare::engine {

class ModelStepRunner final : public StepRunner {
 public:
  // Loads `checkpoint_dir` onto `backend` and reserves KV storage for each history group's pages
  // (options.history_groups()) of options.page_size_tokens tokens in `kv_dtype`, plus one scratch
  // page past them in each group that the scheduler never hands out: the dummy rows that pad
  // decode steps to a graph bucket write there, and released sliding-window blocks name it.
  // Memory backs the scratch page and a first chunk of pages now, the rest as the pool grows
  // (kv_grow); a capacity error (flare::Error) when the device cannot back even those.
  static std::unique_ptr<ModelStepRunner> load(std::unique_ptr<helios::Backend> backend,
                                               const std::filesystem::path& checkpoint_dir,
                                               const EngineOptions& options, helios::DType kv_dtype);
  ModelStepRunner(std::unique_ptr<helios::Backend> backend, std::unique_ptr<model::Model> model,
                  const EngineOptions& options, helios::DType kv_dtype);
  ~ModelStepRunner() override;

  std::int32_t vocab_size() const override { return model_->spec().vocab_size; }
  void bind_thread() override { backend_->bind_thread(); }
  std::int32_t kv_backed_pages() const override { return group_backed_pages(0); }
  std::int32_t group_backed_pages(std::int32_t group) const override;
  // Never throws: a device failure while growing is answered as no more memory.
  std::int32_t kv_grow(std::int32_t n_pages_wanted) override { return group_grow(0, n_pages_wanted); }
  std::int32_t group_grow(std::int32_t group, std::int32_t n_pages_wanted) override;
  const helios::HistoryCaches& kv_cache() const { return cache_; }
  // Samples the plan's rows on the backend (CudaBackend: on the device), one call per run of
  // consecutive rows, and downloads only its host rows.
  void run(const helios::Step& step, std::span<const helios::PageCopy> copies, const SamplingPlan& plan,
           StepResults& out) override;
  const model::Model& model() const { return *model_; }
  helios::Backend& backend() { return *backend_; }

  // Learned drafts: a draft model on the same backend, with the target's vocabulary, gets a KV
  // cache of its own over the same pages (and scratch page), backed as the target's grows; from
  // then on page copies and growth apply to both. Call before capture_graphs and the first step.
  void attach_draft(std::unique_ptr<model::Model> draft);
  bool has_draft_model() const override { return draft_ != nullptr; }
  const model::Model* draft_model() const { return draft_.get(); }
  // Runs the plan's draft forwards (draft_proposal_run), each drawing the argmax of its logits
  // rows where the logits are (on the device for the CUDA backend; only token ids come back).
  void propose_drafts(const DraftPlan& plan, std::span<const helios::PageCopy> copies,
                      std::vector<std::vector<std::int32_t>>& out) override;

  // Captures the decode step of each bucket (rows; the package's concurrency buckets, see
  // decode_buckets) as a graph, after reserving the model's buffers for the largest step the
  // engine options allow; returns the number captured: 0 on a backend without graphs (the CPU) or
  // with options.cuda_graphs off. Afterwards the model's executor pads a decode step of n rows to
  // the smallest captured bucket >= n and replays its graph, likewise a uniform verify step (when
  // speculating: the verify shapes within options.speculative_graph_budget), and replays the
  // prefill chunk's; other steps (mixed) run eagerly.
  std::int32_t capture_graphs(const std::vector<std::int32_t>& buckets);
  const std::vector<std::int32_t>& graph_buckets() const { return graph_buckets_; }

 private:
  std::unique_ptr<helios::Backend> backend_;
  std::unique_ptr<model::Model> model_;  // refers to *backend_
  helios::HistoryCaches cache_;
  EngineOptions options_;
  std::vector<std::int32_t> scratch_pages_;   // each group's extra page (= its pool's n_pages)
  bool shared_page_ids_ = false;              // one scheduler pool: every group follows group 0's ids
  // The caches whose pages group `group`'s pool hands out (the draft's follow group 0).
  std::vector<helios::KvCache*> caches_of_group(std::int32_t group);
  std::vector<std::int32_t> graph_buckets_;   // rows of the captured decode graphs, ascending
  std::unique_ptr<model::Model> draft_;       // refers to *backend_; null without learned drafts
  helios::HistoryCaches draft_cache_;         // every group over group 0's page ids
  helios::SamplingParams greedy_;             // what draft forwards draw with
  std::vector<helios::SampleRequest> draft_requests_;
};

// The decode buckets of a concurrency limit: powers of two up to the first >= max_concurrency.
std::vector<std::int32_t> decode_buckets(std::int32_t max_concurrency);

}  // namespace flare::engine
