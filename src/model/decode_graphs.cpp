// Decode graphs (see model.h): capture of the decode step per row count, and the choice, at each
// step, between replaying a graph and enqueueing the operations one by one.
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

bool Model::capture_decode_graph(std::int32_t n_rows, helios::KvCache& cache, std::int32_t scratch_page) {
  if (!backend_.supports_graphs()) return false;
  if (n_rows < 1) fail(ExitCode::failure, "internal: a decode graph of {} rows", n_rows);
  if (scratch_page < 0 || scratch_page >= cache.layout.n_pages) {
    fail(ExitCode::failure, "internal: scratch page {} outside the KV cache's {} pages", scratch_page, cache.layout.n_pages);
  }
  decode_graphs_.erase(n_rows);
  const helios::Step dummy = helios::step_pad_decode({}, n_rows, scratch_page);
  reserve(n_rows, n_rows, n_rows, n_rows);
  const helios::RotaryParams rope = upload_step(dummy, cache);
  // Once eagerly first: kernels compile and load, and lazily made state (GEMM workspaces and
  // algorithm choices) exists before the capture, during which nothing may allocate or wait.
  enqueue_step(n_rows, cache, rope);
  DecodeGraph entry;
  entry.graph = backend_.capture([&] { enqueue_step(n_rows, cache, rope); });
  entry.cache_storage = cache.storage->data();
  entry.scratch_page = scratch_page;
  entry.scratch_generation = scratch_generation_;
  entry.backend_generation = backend_.graph_generation();
  entry.attention_factor = rope.attention_factor;
  decode_graphs_.emplace(n_rows, std::move(entry));
  return true;
}

std::size_t Model::n_decode_graph_nodes() const {
  std::size_t n = 0;
  for (const auto& [rows, entry] : decode_graphs_) n += entry.graph->n_nodes();
  return n;
}

const Model::DecodeGraph* Model::decode_graph_for(const helios::Step& step, helios::KvCache& cache) {
  if (decode_graphs_.empty() || !helios::step_is_decode(step)) return nullptr;
  const auto it = decode_graphs_.find(step.n_rows());
  if (it == decode_graphs_.end()) return nullptr;
  // Another cache: its pages are not the ones the graph was captured for, nor is the scratch page
  // known to be free there; run eagerly.
  if (it->second.cache_storage != cache.storage->data()) return nullptr;
  if (it->second.scratch_generation != scratch_generation_ ||
      it->second.backend_generation != backend_.graph_generation()) {
    capture_decode_graph(step.n_rows(), cache, it->second.scratch_page);
  }
  return &decode_graphs_.at(step.n_rows());
}

}  // namespace flare::model
