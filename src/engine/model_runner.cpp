// The StepRunner over a real model (see model_runner.h).
#include "engine/model_runner.h"

#include <algorithm>
#include <exception>

#include "common/error.h"
#include "helios/serving_catalog.h"

namespace flare::engine {

std::unique_ptr<ModelStepRunner> ModelStepRunner::load(std::unique_ptr<helios::Backend> backend,
                                                       const std::filesystem::path& checkpoint_dir,
                                                       const EngineOptions& options, helios::DType kv_dtype) {
  if (!backend) fail(ExitCode::failure, "internal: model runner without a backend");
  auto model = model::Model::load(checkpoint_dir, *backend);
  return std::make_unique<ModelStepRunner>(std::move(backend), std::move(model), options, kv_dtype);
}

ModelStepRunner::ModelStepRunner(std::unique_ptr<helios::Backend> backend, std::unique_ptr<model::Model> model,
                                 const EngineOptions& options, helios::DType kv_dtype)
    : backend_(std::move(backend)), model_(std::move(model)), options_(options) {
  if (!backend_ || !model_) fail(ExitCode::failure, "internal: model runner without a backend or a model");
  // Without kv_groups the scheduler keeps one pool and every history group of the model follows its
  // page ids (no window gives pages back): each cache gets n_pages pages, copies and growth.
  const std::size_t n_model_groups = model_->history_groups().size();
  const auto groups = options.kv_groups.empty()
                          ? std::vector<EngineOptions::KvGroup>(n_model_groups, EngineOptions::KvGroup{options.n_pages, 0})
                          : options.kv_groups;
  shared_page_ids_ = options.kv_groups.empty();
  if (groups.size() != n_model_groups) {
    fail(ExitCode::failure, "internal: engine options for {} history groups, the model keeps {}", groups.size(),
         n_model_groups);
  }
  std::vector<std::int32_t> n_pages;
  for (const auto& group : groups) {
    n_pages.push_back(group.n_pages + 1);
    scratch_pages_.push_back(group.n_pages);
  }
  const helios::HistoryLayout layout = model_->kv_cache_layout(n_pages, options.page_size_tokens, kv_dtype);
  cache_.layers = layout.layers;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    cache_.groups.push_back(backend_->reserve_kv_cache(layout.groups[g], groups[g].n_pages));
    cache_.groups.back().group = std::int32_t(g);
    if (backend_->kv_grow(cache_.groups.back(), 1) < 1) {
      fail(ExitCode::capacity, "the device has no memory for the first KV pages ({} tokens each)",
           options.page_size_tokens);
    }
  }
}

std::vector<helios::KvCache*> ModelStepRunner::caches_of_group(std::int32_t group) {
  std::vector<helios::KvCache*> out;
  for (helios::KvCache& cache : cache_.groups) {
    if (cache.group == group || shared_page_ids_) out.push_back(&cache);
  }
  if (group == 0) {
    for (helios::KvCache& cache : draft_cache_.groups) out.push_back(&cache);
  }
  return out;
}

std::int32_t ModelStepRunner::group_backed_pages(std::int32_t group) const {
  std::int32_t n = cache_.groups.at(std::size_t(group)).backed_pages;
  for (helios::KvCache* cache : const_cast<ModelStepRunner*>(this)->caches_of_group(group)) {
    n = std::min(n, cache->backed_pages);
  }
  return n;
}

std::int32_t ModelStepRunner::group_grow(std::int32_t group, std::int32_t n_pages_wanted) {
  try {
    std::int32_t n = backend_->kv_grow(cache_.groups.at(std::size_t(group)), n_pages_wanted);
    for (helios::KvCache* cache : caches_of_group(group)) n = std::min(n, backend_->kv_grow(*cache, n));
    return n;
  } catch (const std::exception&) {
    return group_backed_pages(group);  // the pool stays as it is; a broken device shows in the next step
  }
}

ModelStepRunner::~ModelStepRunner() {
  draft_.reset();
  model_.reset();  // before the backend they live on
  draft_cache_.groups.clear();
  cache_.groups.clear();
}

void ModelStepRunner::attach_draft(std::unique_ptr<model::Model> draft) {
  if (!draft) fail(ExitCode::failure, "internal: attach_draft without a model");
  if (draft->spec().vocab_size != model_->spec().vocab_size) {
    fail_input("the draft model's vocabulary has {} tokens, the target's {}: a draft must share the target's tokenizer",
               draft->spec().vocab_size, model_->spec().vocab_size);
  }
  // The draft follows group 0's page ids (kept whole while it runs) in every group of its own.
  const helios::KvCache& target = cache_.groups.front();
  const helios::HistoryLayout layout =
      draft->kv_cache_layout(options_.n_pages + 1, options_.page_size_tokens, target.layout.dtype);
  draft_cache_.layers = layout.layers;
  for (std::size_t g = 0; g < layout.groups.size(); ++g) {
    draft_cache_.groups.push_back(backend_->reserve_kv_cache(layout.groups[g], options_.n_pages));
    draft_cache_.groups.back().group = std::int32_t(g);
    if (backend_->kv_grow(draft_cache_.groups.back(), target.backed_pages) < std::min(target.backed_pages, 1)) {
      fail(ExitCode::capacity, "the device has no memory for the draft model's first KV pages");
    }
  }
  draft_ = std::move(draft);
  greedy_.temperature = 0.0f;
}

void ModelStepRunner::propose_drafts(const DraftPlan& plan, std::span<const helios::PageCopy> copies,
                                     std::vector<std::vector<std::int32_t>>& out) {
  if (!draft_) StepRunner::propose_drafts(plan, copies, out);
  if (!copies.empty()) {  // group 0's copies, in every group of the draft's
    std::vector<helios::PageCopy> group0;
    for (const helios::PageCopy& copy : copies) {
      if (copy.group == 0) group0.push_back(copy);
    }
    for (helios::KvCache& cache : draft_cache_.groups) backend_->kv_copy_pages(cache, group0);
  }
  draft_proposal_run(plan, [&](const helios::Step& step) {
    const helios::Tensor logits = draft_->forward_logits(step, draft_cache_);
    std::vector<std::int32_t> tokens;
    const std::int32_t n = step.n_logit_rows();
    if (n == 0) return tokens;
    draft_requests_.assign(std::size_t(n), helios::SampleRequest{&greedy_, {}, 0});
    for (const auto& sampled : backend_->sample(logits.slice_rows(0, n), draft_requests_)) tokens.push_back(sampled.token);
    return tokens;
  }, out);
}

std::int32_t ModelStepRunner::capture_graphs(const std::vector<std::int32_t>& buckets) {
  // The sampler's scratch for the most rows a step samples (one per active choice), before the
  // graphs, so the first steps allocate nothing (a no-op where flare run reserved it already).
  backend_->reserve_sampling(options_.max_concurrency, vocab_size());
  graph_buckets_.clear();
  model_->drop_graphs();
  if (draft_) draft_->drop_graphs();
  if (!options_.cuda_graphs || !backend_->supports_graphs() || buckets.empty()) return 0;
  std::vector<std::int32_t> sorted = buckets;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  if (sorted.front() < 1) fail(ExitCode::failure, "internal: a decode graph bucket of {} rows", sorted.front());
  // Buffers for the largest step first, so that no later step moves what the graphs read. Steps
  // that want more logits rows than rows (prompt logprobs) still grow the logits buffer, and the
  // graphs recapture once after that.
  const std::int32_t max_rows = std::max(options_.max_concurrency, sorted.back());
  const std::int32_t max_tokens = std::max(options_.step_token_budget(), max_rows);
  const std::int32_t pages_per_row = (options_.context_limit + options_.page_size_tokens - 1) / options_.page_size_tokens + 1;
  // Verify rows want a logits row per token: room for every row verifying its full width, so that
  // the verify graphs' captures do not move the logits buffer the graphs before them recorded.
  const std::int32_t max_logit_rows =
      std::min(max_tokens, std::max(max_rows, max_rows * (1 + (options_.speculates() ? options_.max_draft_tokens : 0))));
  model_->reserve(max_tokens, max_logit_rows, max_rows, max_rows * pages_per_row);
  if (draft_) draft_->reserve(max_tokens, max_rows, max_rows, max_rows * pages_per_row);
  // The catalog's graphs (serving_step_shapes, which ignition enumerates too), largest first:
  // kernel scratch the backend sizes by the step then has its final size before the smaller graphs
  // record its address. The prefill chunk (a prompt's full chunks while no other row runs; with
  // and without the last token's logits) before the decode buckets.
  // Verify steps (speculating): the bounded set serving_verify_shapes picks.
  const std::int32_t chunk = std::min(options_.prefill_chunk_tokens, max_tokens);
  const helios::DType kv_dtype = cache_.groups.front().layout.dtype;
  for (const helios::StepShape& shape :
       helios::serving_step_shapes(sorted, chunk, std::span(&kv_dtype, 1), options_.max_verify_tokens(),
                                   options_.speculative_token_capacity, options_.speculative_graph_budget)) {
    if (model_->capture_graph(shape, cache_, scratch_pages_) && shape.is_decode()) {
      graph_buckets_.insert(graph_buckets_.begin(), shape.n_rows);
    }
  }
  // The draft's one-token forwards (draft_proposal_run) are decode steps of its own: the same buckets.
  if (draft_) {
    for (auto it = sorted.rbegin(); it != sorted.rend(); ++it) {
      draft_->capture_decode_graph(*it, draft_cache_, {scratch_pages_.front()});
    }
  }
  backend_->synchronize();  // a failing warm-up or capture shows here, at load, not at the first step
  return std::int32_t(graph_buckets_.size());
}

void ModelStepRunner::run(const helios::Step& step, std::span<const helios::PageCopy> copies, const SamplingPlan& plan,
                          StepResults& out) {
  sampling_plan_validate(plan, step.n_logit_rows());
  helios::history_copy_pages(*backend_, cache_, copies, shared_page_ids_);
  // The executor pads a decode step up to the smallest captured bucket; the logits of its real rows
  // come first.
  const helios::Tensor logits = model_->forward_logits(step, cache_);
  out.sampled.clear();
  out.sampled.reserve(plan.sampled_rows.size());
  sampling_plan_runs(plan.sampled_rows, [&](std::int32_t first, std::int32_t n, std::size_t offset) {
    auto sampled = backend_->sample(logits.slice_rows(first, n), std::span(plan.requests).subspan(offset, std::size_t(n)));
    for (auto& token : sampled) out.sampled.push_back(std::move(token));
  });
  const auto vocab = std::size_t(vocab_size());
  out.host_logits.resize(plan.host_rows.size() * vocab);
  sampling_plan_runs(plan.host_rows, [&](std::int32_t first, std::int32_t n, std::size_t offset) {
    model_->download_logits(first, n, std::span(out.host_logits).subspan(offset * vocab, std::size_t(n) * vocab));
  });
}

std::vector<std::int32_t> decode_buckets(std::int32_t max_concurrency) {
  return helios::serving_decode_buckets(max_concurrency);
}

}  // namespace flare::engine
