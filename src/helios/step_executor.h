// The step executor: runs any architecture's forward program (step_program.h) one step at a time,
// and is the one owner of graph policy. It owns the activation arena, the step upload, the graphs
// captured per step shape (step_shape.h), the padding of smaller steps up to a captured shape, and
// recapture when a buffer a graph recorded has moved.
//
//   helios::StepExecutor executor(backend, program);
//   executor.capture({8, 1, 1, DType::bf16}, cache, scratch_page);   // decode steps of <= 8 rows
//   helios::Tensor logits = executor.forward_logits(step, cache);   // [step.n_logit_rows(), vocab]
//
// A graph records kernel launches whose arguments are device addresses (weights, the KV cache, the
// arena, the backend's step arrays) and the shape; every per-step value (tokens, positions, block
// tables, rope rows) is read from device memory the upload fills before the launch. So a graph
// stays valid while those addresses hold; a step on another cache runs eagerly. Not thread-safe:
// the engine thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "helios/activation_arena.h"
#include "helios/backend.h"
#include "helios/history.h"
#include "helios/step_program.h"
#include "helios/step_shape.h"

namespace flare::helios {

class StepExecutor {
 public:
  StepExecutor(Backend& backend, StepProgram& program);

  Backend& backend() { return backend_; }
  ActivationArena& arena() { return arena_; }
  std::int32_t vocab_size() const { return vocab_size_; }

  // Sizes the arena and the backend's step arrays for steps of up to these counts (max_blocks:
  // the sum of the rows' n_blocks) up front; larger steps grow them, which makes the graphs
  // recapture on their next use.
  void reserve(std::int32_t max_tokens, std::int32_t max_logit_rows, std::int32_t max_rows, std::int32_t max_blocks = 0);

  // Runs one step (prefill chunks and decode rows alike): replays the graph of the smallest
  // captured shape that holds it (padded with dummy rows), else enqueues it op by op. Returns its
  // logits [step.n_logit_rows(), vocab] F32, on the device, valid until the next step.
  Tensor forward_logits(const Step& step, HistoryCaches& caches);
  // The same, with the logits copied to the host.
  std::vector<float> forward(const Step& step, HistoryCaches& caches);
  // Copies rows [first_row, first_row + n_rows) of the last step's logits to `out`.
  void download_logits(std::int32_t first_row, std::int32_t n_rows, std::span<float> out);

  // Captures steps of `shape` as a graph (after one eager run of a dummy step on `scratch_page`,
  // a page of `cache` no sequence may own). False when the backend has no graphs; flare::Error
  // when the capture fails.
  // scratch_pages: each history group's scratch page (one: the same page id in every group).
  bool capture(const StepShape& shape, HistoryCaches& caches, std::vector<std::int32_t> scratch_pages);
  void drop_graphs() { graphs_.clear(); }
  std::vector<StepShape> graph_shapes() const;
  std::size_t graph_nodes(const StepShape& shape) const;  // 0 when not captured
  std::int64_t n_graph_replays() const { return n_graph_replays_; }
  std::int64_t n_verify_graph_replays() const { return n_verify_graph_replays_; }  // of them, verify shapes'

 private:
  struct Captured {
    std::unique_ptr<StepGraph> graph;
    std::vector<const void*> cache_storage;  // the KV caches it reads and writes
    std::vector<std::int32_t> scratch_pages;  // for padding and a recapture
    std::uint64_t arena_generation = 0;    // the activation buffers it uses
    std::uint64_t backend_generation = 0;  // the backend's own buffers (Backend::graph_generation)
    StepLaunch launch;
  };

  StepCounts counts_of(const Step& step) const;
  // Throws unless `caches` are one cache per history group, in order, that the program can use.
  void check(const HistoryCaches& caches);
  StepLaunch upload(const Step& step, const HistoryCaches& caches);
  // The captured entry that runs `step` (its shape, or a decode shape with more rows); nullptr
  // when none applies.
  const std::pair<const StepShape, Captured>* graph_for(const Step& step, HistoryCaches& caches);
  // `entry`, captured again first when a buffer it recorded has moved since.
  const std::pair<const StepShape, Captured>* refreshed(const std::pair<const StepShape, Captured>& entry,
                                                        HistoryCaches& caches);

  Backend& backend_;
  StepProgram& program_;
  std::int32_t vocab_size_ = 0;
  ActivationArena arena_;
  std::int32_t capacity_blocks_ = 0;
  std::int32_t n_groups_ = 1;
  std::int32_t reserved_groups_ = 1;  // group tables the backend's step arrays were sized for  // history groups of the caches last seen (the step arrays hold a table each)
  std::map<StepShape, Captured> graphs_;
  std::int64_t n_graph_replays_ = 0;
  std::int64_t n_verify_graph_replays_ = 0;
};

}  // namespace flare::helios
