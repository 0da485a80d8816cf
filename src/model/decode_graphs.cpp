// Step graphs (see model.h): capture of the decode step per row count and of the one-row prefill
// chunk per (tokens, logits), and the choice, at each step, between replaying a graph and
// enqueueing the operations one by one.
//
// A graph records kernel launches whose arguments are device addresses (weights, the KV cache, the
// activation buffers, the backend's step arrays) and the step's shape; every per-step value
// (tokens, positions, block tables, rope rows) is read from device memory that upload_step fills
// before the launch. So a graph stays valid while those addresses hold: a reallocation of the
// activations, the step arrays or a backend scratch buffer (a larger step than reserved) makes it
// recapture on its next use;
// a step on another cache runs eagerly.
#include <algorithm>

#include "common/error.h"
#include "helios/decode_padding.h"
#include "model/model.h"

namespace flare::model {

Model::CapturedStep Model::capture(const helios::Step& step, helios::KvCache& cache, std::int32_t scratch_page) {
  reserve(step.n_tokens(), std::max(step.n_logit_rows(), 1), step.n_rows(), std::int32_t(step.block_tables.size()));
  const helios::RotaryParams rope = upload_step(step, cache);
  // Once eagerly first: kernels compile and load, and lazily made state (GEMM workspaces and
  // algorithm choices) exists before the capture, during which nothing may allocate or wait.
  enqueue_step(step.n_logit_rows(), cache, rope);
  CapturedStep entry;
  entry.graph = backend_.capture([&] { enqueue_step(step.n_logit_rows(), cache, rope); });
  entry.cache_storage = cache.storage->data();
  entry.scratch_page = scratch_page;
  entry.scratch_generation = scratch_generation_;
  entry.backend_generation = backend_.graph_generation();
  entry.attention_factor = rope.attention_factor;
  return entry;
}

bool Model::capture_decode_graph(std::int32_t n_rows, helios::KvCache& cache, std::int32_t scratch_page) {
  if (!backend_.supports_graphs()) return false;
  if (n_rows < 1) fail(ExitCode::failure, "internal: a decode graph of {} rows", n_rows);
  if (scratch_page < 0 || scratch_page >= cache.layout.n_pages) {
    fail(ExitCode::failure, "internal: scratch page {} outside the KV cache's {} pages", scratch_page, cache.layout.n_pages);
  }
  decode_graphs_.erase(n_rows);
  decode_graphs_.emplace(n_rows, capture(helios::step_pad_decode({}, n_rows, scratch_page), cache, scratch_page));
  return true;
}

bool Model::capture_prefill_graph(std::int32_t n_tokens, std::int32_t n_logits, helios::KvCache& cache,
                                  std::int32_t scratch_page) {
  if (!backend_.supports_graphs()) return false;
  if (n_tokens < 2 || n_logits < 0 || n_logits > 1) {
    fail(ExitCode::failure, "internal: a prefill graph of {} tokens and {} logits rows", n_tokens, n_logits);
  }
  if (scratch_page < 0 || scratch_page >= cache.layout.n_pages) {
    fail(ExitCode::failure, "internal: scratch page {} outside the KV cache's {} pages", scratch_page, cache.layout.n_pages);
  }
  // One row at position 0 whose every block is the scratch page: positions p and p + page_size
  // share a slot there, which only the dummy's own garbage attention reads.
  helios::Step dummy;
  helios::StepRow row;
  row.n_tokens = n_tokens;
  row.start_position = 0;
  row.n_logits = n_logits;
  row.first_block = 0;
  row.n_blocks = (n_tokens + cache.layout.page_size_tokens - 1) / cache.layout.page_size_tokens;
  dummy.rows.push_back(row);
  dummy.tokens.assign(std::size_t(n_tokens), 0);
  dummy.block_tables.assign(std::size_t(row.n_blocks), scratch_page);
  const std::pair key{n_tokens, n_logits};
  prefill_graphs_.erase(key);
  prefill_graphs_.emplace(key, capture(dummy, cache, scratch_page));
  return true;
}

std::size_t Model::n_decode_graph_nodes() const {
  std::size_t n = 0;
  for (const auto& [rows, entry] : decode_graphs_) n += entry.graph->n_nodes();
  return n;
}

std::size_t Model::n_prefill_graph_nodes() const {
  std::size_t n = 0;
  for (const auto& [shape, entry] : prefill_graphs_) n += entry.graph->n_nodes();
  return n;
}

const Model::CapturedStep* Model::graph_for(const helios::Step& step, helios::KvCache& cache) {
  if (step.rows.empty()) return nullptr;
  const bool decode = helios::step_is_decode(step);
  if (!decode && (step.n_rows() != 1 || step.rows[0].n_tokens < 2 || step.rows[0].n_logits > 1)) return nullptr;
  const std::int32_t n_logits = step.rows[0].n_logits;
  const auto find = [&]() -> CapturedStep* {
    if (decode) {
      const auto it = decode_graphs_.find(step.n_rows());
      return it == decode_graphs_.end() ? nullptr : &it->second;
    }
    const auto it = prefill_graphs_.find({step.n_tokens(), n_logits});
    return it == prefill_graphs_.end() ? nullptr : &it->second;
  };
  const CapturedStep* entry = find();
  // Another cache: its pages are not the ones the graph was captured for, nor is the scratch page
  // known to be free there; run eagerly.
  if (entry == nullptr || entry->cache_storage != cache.storage->data()) return nullptr;
  if (entry->scratch_generation != scratch_generation_ || entry->backend_generation != backend_.graph_generation()) {
    const std::int32_t scratch_page = entry->scratch_page;
    if (decode) {
      capture_decode_graph(step.n_rows(), cache, scratch_page);
    } else {
      capture_prefill_graph(step.n_tokens(), n_logits, cache, scratch_page);
    }
    entry = find();
  }
  return entry;
}

}  // namespace flare::model
