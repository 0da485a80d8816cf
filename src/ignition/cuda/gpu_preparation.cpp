// GPU preparation (see gpu_preparation.h) on the CUDA backend.
#include "ignition/gpu_preparation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "common/error.h"
#include "helios/cuda/cuda_backend.h"
#include "helios/cuda/kernel_catalog.h"
#include "helios/gemm_tuning.h"
#include "model/kernel_needs.h"
#include "model/model.h"
#include "model/prepared_views.h"

namespace flare::ignition {

using helios::Step;
using helios::StepRow;

struct GpuPreparation::State {
  model::ModelSpec spec;
  GpuPreparationOptions options;
  std::unique_ptr<helios::cuda::CudaBackend> backend;
  std::unique_ptr<model::Model> model;
  helios::HistoryCaches cache;
  std::unique_ptr<model::Model> draft;  // with options.draft; its cache has the target's page count
  helios::HistoryCaches draft_cache;
  helios::ServingCatalog catalog;  // of the backend's platform and the model at these settings
  GpuPreparationCounts counts;
  std::size_t free_at_start = 0;

  // A step of one row per entry of `row_tokens`, each starting at `start` with fresh pages; every
  // row asks for the logits of its last token.
  Step make_step(const std::vector<std::int32_t>& row_tokens, std::int32_t start) {
    const std::int32_t page = options.page_size_tokens;
    Step step;
    std::int32_t page_cursor = 0;
    for (std::int32_t n : row_tokens) {
      StepRow row;
      row.n_tokens = n;
      row.start_position = start;
      row.n_logits = 1;
      row.first_block = std::int32_t(step.block_tables.size());
      row.n_blocks = (start + n + page - 1) / page;
      for (std::int32_t b = 0; b < row.n_blocks; ++b)
        step.block_tables.push_back(page_cursor++ % cache.groups.front().layout.n_pages);
      for (std::int32_t t = 0; t < n; ++t) step.tokens.push_back((t * 7919 + start) % spec.vocab_size);
      step.rows.push_back(row);
    }
    return step;
  }

  // A uniform step of n_rows rows of n_tokens tokens each after `start` cached positions, every
  // token's logits wanted where a row has several (a verify row), the last one's otherwise. Rows
  // share pages where the cache has fewer than they need: a step timed, not a result checked.
  Step make_uniform_step(std::int32_t n_rows, std::int32_t n_tokens, std::int32_t start) {
    Step step = make_step(std::vector<std::int32_t>(std::size_t(n_rows), n_tokens), start);
    for (StepRow& row : step.rows) row.n_logits = n_tokens;
    return step;
  }

  // Runs the step and checks its logits: a broken kernel shows here, not in the first request.
  // The draft model, where there is one, runs the same step over its own cache.
  void run(const Step& step) {
    run_one(*model, cache, step, "");
    if (draft) run_one(*draft, draft_cache, step, "the draft model's ");
  }
  void run_one(model::Model& m, helios::HistoryCaches& c, const Step& step, const char* whose) {
    const std::vector<float> logits = m.forward(step, c);
    for (float v : logits)
      if (!std::isfinite(v))
        fail(ExitCode::preparation, "{}warm-up forward of {} tokens produced non-finite logits on {}", whose,
             step.n_tokens(), backend->device().arch());
    ++counts.n_forwards;
  }
};

GpuPreparation::GpuPreparation(const model::ModelSpec& spec, const GpuPreparationOptions& options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.spec = spec;
  s.options = options;
  s.backend = std::make_unique<helios::cuda::CudaBackend>(options.device_index, options.kernel_cache_dir,
                                                          options.cuda_root);
  s.backend->set_gemm_effort(helios::parse_tune_effort(options.autotune_effort));
  // What flare run serves: the package's decode buckets and prefill chunk over BF16 pages.
  model::ServingSettings serving;
  serving.decode_buckets.assign(options.buckets.begin(), options.buckets.end());
  serving.prefill_chunk_tokens = options.prefill_chunk_tokens;
  serving.page_size_tokens = options.page_size_tokens;
  serving.kv_dtypes = {helios::DType::bf16};
  serving.max_verify_tokens = options.max_verify_tokens;
  serving.verify_token_capacity = options.verify_token_capacity;
  serving.verify_graph_budget = options.verify_graph_budget;
  s.catalog = helios::cuda::kernel_catalog(s.backend->platform(),
                                           model::kernel_needs(spec, serving, options.draft ? &*options.draft : nullptr));
  std::size_t total = 0;
  helios::cuda::check(helios::cuda::driver().mem_get_info(&s.free_at_start, &total), "cuMemGetInfo");
}

GpuPreparation::~GpuPreparation() = default;

std::string GpuPreparation::arch() const { return state_->backend->device().arch(); }
std::string GpuPreparation::device_name() const { return state_->backend->device().name; }
std::string GpuPreparation::compiler() const { return state_->backend->compiler(); }
const GpuPreparationCounts& GpuPreparation::counts() const { return state_->counts; }
const helios::ServingCatalog& GpuPreparation::catalog() const { return state_->catalog; }

void GpuPreparation::compile_catalog() {
  State& s = *state_;
  s.backend->precompile(helios::cuda::kernel_catalog_modules(s.catalog.platform, s.catalog.needs));
}

void GpuPreparation::load_weights(const model::PreparedLookup& lookup) {
  State& s = *state_;
  model::LoadedWeights weights = model::weights_from_prepared(s.spec, lookup, *s.backend);
  s.model = std::make_unique<model::Model>(s.spec, *s.backend, std::move(weights));
  const std::int32_t page = s.options.page_size_tokens;
  const std::uint32_t max_bucket = s.options.buckets.empty() ? 1 : s.options.buckets.back();
  // Enough pages for one prefill chunk, or every bucket row at a short context, whichever is more.
  const std::int32_t n_pages = std::max<std::int32_t>((s.options.prefill_chunk_tokens + page - 1) / page + 2,
                                                      std::int32_t(max_bucket) * 4 + 4);
  s.cache = helios::history_allocate(*s.backend, s.model->kv_cache_layout(n_pages, page));
  s.model->reserve(s.options.prefill_chunk_tokens + std::int32_t(max_bucket), std::int32_t(max_bucket) + 1,
                   std::int32_t(max_bucket) + 1);
  if (s.options.draft) {
    model::LoadedWeights draft_weights =
        model::weights_from_prepared(*s.options.draft, model::prefixed_lookup(lookup, "draft/"), *s.backend);
    s.draft = std::make_unique<model::Model>(*s.options.draft, *s.backend, std::move(draft_weights));
    s.draft_cache = helios::history_allocate(*s.backend, s.draft->kv_cache_layout(n_pages, page));
    s.draft->reserve(s.options.prefill_chunk_tokens + std::int32_t(max_bucket), std::int32_t(max_bucket) + 1,
                     std::int32_t(max_bucket) + 1);
  }
}

void GpuPreparation::tune_gemms() {
  State& s = *state_;
  if (!s.model) fail(ExitCode::failure, "internal: tune_gemms before load_weights");
  const std::int64_t timed_before = s.backend->gemm_tuning().n_timed();
  // Every m bucket a serving step can produce (a prefill chunk plus a decode row per slot), each
  // through one forward of that many tokens: the GEMMs of every layer tune at that m on first use.
  const std::uint32_t max_bucket = s.options.buckets.empty() ? 1 : s.options.buckets.back();
  std::set<std::int64_t> buckets;
  for (std::int64_t m = 1; m <= s.options.prefill_chunk_tokens + std::int64_t(max_bucket); ++m)
    buckets.insert(helios::GemmTuning::bucket_m(m));
  for (std::int64_t m : buckets) {
    // Beyond one chunk, the extra tokens are decode rows beside it, as in a mixed serving step.
    const std::int32_t chunk = std::int32_t(std::min<std::int64_t>(m, s.options.prefill_chunk_tokens));
    std::vector<std::int32_t> rows{chunk};
    rows.resize(std::size_t(1 + (m - chunk)), 1);
    s.run(s.make_step(rows, 0));
  }
  s.counts.n_tuned += s.backend->gemm_tuning().n_timed() - timed_before;
}

void GpuPreparation::compile_forwards() {
  State& s = *state_;
  if (!s.model) fail(ExitCode::failure, "internal: compile_forwards before load_weights");
  const std::int64_t timed_before = s.backend->gemm_tuning().n_timed();
  const std::int32_t page = s.options.page_size_tokens;
  // A full prefill chunk, then each decode bucket over a short cached context, then a mixed step
  // (a prefill chunk continuing after cached tokens beside decode rows).
  s.run(s.make_step({s.options.prefill_chunk_tokens}, 0));
  for (std::uint32_t bucket : s.options.buckets)
    s.run(s.make_step(std::vector<std::int32_t>(bucket, 1), 2 * page + 3));
  std::vector<std::int32_t> mixed{std::min<std::int32_t>(s.options.prefill_chunk_tokens / 2, 3 * page)};
  for (std::uint32_t i = 0; i < std::min<std::uint32_t>(3, s.options.buckets.empty() ? 1 : s.options.buckets.back()); ++i)
    mixed.push_back(1);
  s.run(s.make_step(mixed, page + 1));

  // Sampling of the last step's logits, greedy and with every filter, so a device sampler's
  // kernels are part of the package too.
  const helios::Tensor logits = s.model->forward_logits(s.make_step({1, 1}, 5), s.cache);
  helios::SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.n_top_logprobs = 5;
  helios::SamplingParams filtered;
  filtered.temperature = 0.8f;
  filtered.top_k = 40;
  filtered.top_p = 0.95f;
  filtered.min_p = 0.05f;
  filtered.repetition_penalty = 1.1f;
  filtered.presence_penalty = 0.5f;
  filtered.seed = 7;
  const std::vector<std::int32_t> prompt{1, 2, 3};
  std::vector<helios::SampleRequest> requests(2);
  requests[0].params = &greedy;
  requests[1].params = &filtered;
  for (auto& r : requests) r.history.prompt = prompt;
  const auto sampled = s.backend->sample(logits, requests);
  for (const auto& token : sampled)
    if (token.token < 0 || token.token >= s.spec.vocab_size || !std::isfinite(token.logprob))
      fail(ExitCode::preparation, "the warm-up forward produced invalid logits on {} (token {}, logprob {})",
           s.backend->device().arch(), token.token, token.logprob);
  ++s.counts.n_forwards;
  s.counts.n_tuned += s.backend->gemm_tuning().n_timed() - timed_before;
  s.counts.n_compiled = s.backend->kernel_cache().n_builds();
  s.counts.n_reused = s.backend->kernel_cache().n_hits();
  s.counts.n_fused = std::int64_t(s.backend->gemm_tuning().n_fused());
  s.counts.n_shapes = std::int64_t(s.backend->gemm_tuning().size()) - s.counts.n_fused;
}

void GpuPreparation::capture_graphs() {
  State& s = *state_;
  if (!s.model) fail(ExitCode::failure, "internal: capture_graphs before load_weights");
  // Proves every graph of the catalog captures on this GPU; flare run captures its own from the
  // same shapes (a graph belongs to the process that built it). The last page is the capture's
  // scratch page.
  const std::int32_t scratch_page = s.cache.groups.front().layout.n_pages - 1;
  for (const helios::StepShape& shape : s.catalog.graphs) {
    if (shape.kv_dtype != s.cache.groups.front().layout.dtype) continue;
    if (!s.model->capture_graph(shape, s.cache, {scratch_page})) break;  // the backend has no graphs
  }
  // The draft's one-token forwards replay decode graphs of the same buckets (ModelStepRunner).
  if (s.draft) {
    for (auto it = s.options.buckets.rbegin(); it != s.options.buckets.rend(); ++it) {
      if (!s.draft->capture_decode_graph(std::int32_t(*it), s.draft_cache, {scratch_page})) break;
    }
    s.counts.n_draft_graphs = s.draft->n_decode_graphs();
  }
  s.counts.n_graphs = s.model->n_decode_graphs();
  s.counts.n_prefill_graphs = s.model->n_prefill_graphs();
  s.counts.n_verify_graphs = s.model->n_verify_graphs();
}

std::vector<MeasuredStepTime> GpuPreparation::time_steps() {
  State& s = *state_;
  if (!s.model) fail(ExitCode::failure, "internal: time_steps before load_weights");
  using Clock = std::chrono::steady_clock;
  constexpr std::int32_t k_context = 256;  // short: the weights dominate, as they do a round's cost
  constexpr int k_replays = 10, k_runs = 3;
  std::vector<MeasuredStepTime> times;
  if (s.counts.n_graphs + s.counts.n_verify_graphs == 0) return times;  // nothing captured: nothing replays
  for (const helios::StepShape& shape : s.catalog.graphs) {
    if (shape.kv_dtype != s.cache.groups.front().layout.dtype || !(shape.is_decode() || shape.is_verify())) continue;
    const Step step = s.make_uniform_step(shape.n_rows, shape.tokens_per_row, k_context);
    s.model->forward_logits(step, s.cache);  // warm-up: the graph's first replay uploads and loads
    s.backend->synchronize();
    std::vector<double> runs;
    for (int run = 0; run < k_runs; ++run) {
      const auto begin = Clock::now();
      for (int i = 0; i < k_replays; ++i) s.model->forward_logits(step, s.cache);
      s.backend->synchronize();
      runs.push_back(std::chrono::duration<double, std::milli>(Clock::now() - begin).count() / k_replays);
    }
    std::ranges::sort(runs);
    times.push_back({shape.n_rows, shape.tokens_per_row, runs[runs.size() / 2]});
  }
  return times;
}

std::uint64_t GpuPreparation::device_bytes_in_use() const {
  std::size_t free_now = 0, total = 0;
  helios::cuda::check(helios::cuda::driver().mem_get_info(&free_now, &total), "cuMemGetInfo");
  return state_->free_at_start > free_now ? state_->free_at_start - free_now : 0;
}

std::map<std::string, std::string> GpuPreparation::kernel_images() const {
  const State& s = *state_;
  const std::map<std::string, std::string>& loaded = s.backend->loaded_images();
  std::vector<std::string> beyond;
  for (const auto& [key, image] : loaded) {
    if (!std::ranges::binary_search(s.catalog.modules, key)) beyond.push_back(key);
  }
  if (!beyond.empty()) {
    fail(ExitCode::failure, "internal: the warm-up forwards on {} loaded {} kernel module{} the kernel catalog does "
         "not list (kernel_catalog.h misses a launch): {}", s.backend->device().arch(), beyond.size(),
         beyond.size() == 1 ? "" : "s", fmt::join(beyond, "; "));
  }
  std::map<std::string, std::string> images;
  for (const std::string& key : s.catalog.modules) {
    const auto it = loaded.find(key);
    if (it == loaded.end()) fail(ExitCode::failure, "internal: catalog module '{}' was never compiled", key);
    images.emplace(key, it->second);
  }
  return images;
}

std::string GpuPreparation::gemm_tuning_table() const {
  const State& s = *state_;
  if (s.backend->gemm_engine_name() != "cublaslt") return "";
  return s.backend->gemm_tuning().serialize();
}

}  // namespace flare::ignition
