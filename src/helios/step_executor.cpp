// The step executor (see step_executor.h).
#include "helios/step_executor.h"

#include <algorithm>

#include "common/error.h"

namespace flare::helios {
namespace {

ArenaPlan program_arena(StepProgram& program) {
  ArenaPlan plan(program.vocab_size());
  program.plan_arena(plan);
  return plan;
}

std::vector<const void*> storages(const HistoryCaches& caches) {
  std::vector<const void*> out;
  for (const KvCache& cache : caches.groups) out.push_back(cache.storage->data());
  return out;
}

std::int32_t page_size(const HistoryCaches& caches) { return caches.groups.front().layout.page_size_tokens; }

}  // namespace

void StepExecutor::check(const HistoryCaches& caches) {
  if (caches.groups.empty()) fail(ExitCode::failure, "internal: a step over no KV cache");
  for (std::size_t g = 0; g < caches.groups.size(); ++g) {
    if (caches.groups[g].group != std::int32_t(g)) {
      fail(ExitCode::failure, "internal: KV cache {} stores history group {}", g, caches.groups[g].group);
    }
  }
  program_.check_cache(caches.layout());
  n_groups_ = std::int32_t(caches.groups.size());
}

StepExecutor::StepExecutor(Backend& backend, StepProgram& program)
    : backend_(backend), program_(program), vocab_size_(program.vocab_size()), arena_(backend, program_arena(program)) {}

void StepExecutor::reserve(std::int32_t n_tokens, std::int32_t n_logit_rows, std::int32_t n_rows, std::int32_t n_blocks) {
  const ArenaCapacity& have = arena_.capacity();
  if (n_tokens > have.tokens || n_rows > have.rows || n_blocks > capacity_blocks_ || n_groups_ > reserved_groups_) {
    capacity_blocks_ = std::max(n_blocks, capacity_blocks_);
    reserved_groups_ = std::max(n_groups_, reserved_groups_);
    // Moving the step arrays changes the backend's graph generation, which the graphs check.
    backend_.reserve_step(std::max(n_tokens, have.tokens), std::max(n_rows, have.rows), capacity_blocks_, reserved_groups_);
  }
  arena_.reserve({n_tokens, n_logit_rows, n_rows});
}

StepCounts StepExecutor::counts_of(const Step& step) const {
  return {step.n_tokens(), step.n_rows(), step.n_logit_rows()};
}

StepLaunch StepExecutor::upload(const Step& step, const HistoryCaches& caches) {
  // Graph replays skip the embedding's host-side check of the token ids, so check them here.
  for (const std::int32_t token : step.tokens) {
    if (token < 0 || token >= vocab_size_) fail_input("token id {} outside the vocabulary 0..{}", token, vocab_size_ - 1);
  }
  const std::vector<const KvCache*> pointers = caches.pointers();
  backend_.begin_step(step, pointers);
  return program_.upload(step, arena_);
}

Tensor StepExecutor::forward_logits(const Step& step, HistoryCaches& caches) {
  check(caches);
  reserve(std::max(step.n_tokens(), 1), std::max(step.n_logit_rows(), 1), std::max(step.n_rows(), 1),
          std::int32_t(step.block_tables.size()));
  if (step.n_tokens() == 0) return arena_.view(k_arena_logits, 0);
  const auto* entry = graph_for(step, caches);
  Step padded;
  const Step* run = &step;
  if (entry && entry->first.n_rows > step.n_rows()) {
    padded = step_pad_rows(step, entry->first, page_size(caches), entry->second.scratch_pages);
    reserve(padded.n_tokens(), padded.n_logit_rows(), padded.n_rows(), std::int32_t(padded.block_tables.size()));
    run = &padded;
  }
  if (entry) entry = refreshed(*entry, caches);  // before the uploads: a recapture makes its own
  const StepLaunch launch = upload(*run, caches);
  if (entry && launch == entry->second.launch) {
    backend_.replay(*entry->second.graph);
    ++n_graph_replays_;
    if (entry->first.is_verify()) ++n_verify_graph_replays_;
  } else {
    program_.enqueue(counts_of(*run), arena_, caches, launch);
  }
  return arena_.view(k_arena_logits, step.n_logit_rows());
}

std::vector<float> StepExecutor::forward(const Step& step, HistoryCaches& caches) {
  forward_logits(step, caches);
  std::vector<float> logits(std::size_t(step.n_logit_rows()) * std::size_t(vocab_size_));
  if (!logits.empty()) backend_.download(arena_.buffer(k_arena_logits), 0, logits.data(), logits.size() * sizeof(float));
  return logits;
}

void StepExecutor::download_logits(std::int32_t first_row, std::int32_t n_rows, std::span<float> out) {
  const std::size_t vocab = std::size_t(vocab_size_), n = std::size_t(n_rows) * vocab;
  if (first_row < 0 || n_rows < 0 || first_row + n_rows > arena_.capacity().logit_rows || out.size() != n) {
    fail(ExitCode::failure, "internal: downloading logits rows {}..{} into {} floats", first_row, first_row + n_rows,
         out.size());
  }
  if (n > 0) {
    backend_.download(arena_.buffer(k_arena_logits), std::size_t(first_row) * vocab * sizeof(float), out.data(),
                      n * sizeof(float));
  }
}

bool StepExecutor::capture(const StepShape& shape, HistoryCaches& caches, std::vector<std::int32_t> scratch_pages) {
  if (!backend_.supports_graphs()) return false;
  check(caches);
  if (scratch_pages.size() != 1 && scratch_pages.size() != caches.groups.size()) {
    fail(ExitCode::failure, "internal: {} scratch pages for {} history groups", scratch_pages.size(), caches.groups.size());
  }
  for (std::size_t g = 0; g < caches.groups.size(); ++g) {
    const KvCache& cache = caches.groups[g];
    const std::int32_t scratch_page = scratch_pages[std::min(g, scratch_pages.size() - 1)];
    if (shape.kv_dtype != cache.layout.dtype) {
      fail(ExitCode::failure, "internal: capturing {} over a {} KV cache", shape.describe(), dtype_name(cache.layout.dtype));
    }
    if (scratch_page < 0 || scratch_page >= cache.layout.n_pages) {
      fail(ExitCode::failure, "internal: scratch page {} outside the KV cache's {} pages", scratch_page,
           cache.layout.n_pages);
    }
  }
  const Step dummy = step_dummy(shape, page_size(caches), scratch_pages);
  const StepCounts counts = counts_of(dummy);
  reserve(counts.n_tokens, std::max(counts.n_logit_rows, 1), counts.n_rows, std::int32_t(dummy.block_tables.size()));
  const StepLaunch launch = upload(dummy, caches);
  // Once eagerly first: kernels compile and load, and lazily made state (GEMM workspaces and
  // algorithm choices) exists before the capture, during which nothing may allocate or wait.
  program_.enqueue(counts, arena_, caches, launch);
  Captured entry;
  // By value: a backend may keep the recording's callable (the CPU test backend replays it).
  HistoryCaches* caches_ptr = &caches;
  entry.graph =
      backend_.capture([this, counts, launch, caches_ptr] { program_.enqueue(counts, arena_, *caches_ptr, launch); });
  entry.cache_storage = storages(caches);
  entry.scratch_pages = std::move(scratch_pages);
  entry.arena_generation = arena_.generation();
  entry.backend_generation = backend_.graph_generation();
  entry.launch = launch;
  graphs_.insert_or_assign(shape, std::move(entry));
  return true;
}

std::vector<StepShape> StepExecutor::graph_shapes() const {
  std::vector<StepShape> shapes;
  for (const auto& [shape, entry] : graphs_) shapes.push_back(shape);
  return shapes;
}

std::size_t StepExecutor::graph_nodes(const StepShape& shape) const {
  const auto it = graphs_.find(shape);
  return it == graphs_.end() ? 0 : it->second.graph->n_nodes();
}

const std::pair<const StepShape, StepExecutor::Captured>* StepExecutor::graph_for(const Step& step,
                                                                                  HistoryCaches& caches) {
  const std::optional<StepShape> shape = step_shape_of(step, caches.groups.front().layout.dtype);
  if (!shape) return nullptr;
  // The captured shape with the same rows and the fewest rows that hold the step. Decode and verify
  // shapes are padded; a prompt chunk's dummy row would cost as much as a real one (verify rows
  // are short: a dummy costs its few tokens' share of the GEMMs, a replay saves every launch).
  const std::pair<const StepShape, Captured>* best = nullptr;
  for (const auto& item : graphs_) {
    const StepShape& s = item.first;
    if (s.tokens_per_row != shape->tokens_per_row || s.logits_per_row != shape->logits_per_row ||
        s.kv_dtype != shape->kv_dtype || s.n_rows < shape->n_rows) {
      continue;
    }
    if (s.n_rows != shape->n_rows && !s.is_decode() && !s.is_verify()) continue;
    if (!best || s.n_rows < best->first.n_rows) best = &item;
  }
  // Another cache: its pages are not the ones the graph was captured for, nor is the scratch page
  // known to be free there; run eagerly.
  if (!best || best->second.cache_storage != storages(caches)) return nullptr;
  // A step without its own tables for every group pads only block_tables: the scratch page must
  // then be one page id for every group.
  if (best->first.n_rows > step.n_rows() && best->second.scratch_pages.size() > 1 &&
      step.group_block_tables.size() + 1 != caches.groups.size()) {
    return nullptr;
  }
  return best;
}

const std::pair<const StepShape, StepExecutor::Captured>* StepExecutor::refreshed(
    const std::pair<const StepShape, Captured>& entry, HistoryCaches& caches) {
  if (entry.second.arena_generation == arena_.generation() &&
      entry.second.backend_generation == backend_.graph_generation()) {
    return &entry;
  }
  const StepShape key = entry.first;
  capture(key, caches, entry.second.scratch_pages);
  return &*graphs_.find(key);
}

}  // namespace flare::helios
