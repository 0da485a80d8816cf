// A forward program: what an architecture gives the step executor (step_executor.h). The executor
// owns the arena, the step upload, the graphs and padding; the program only declares its
// activation buffers, uploads the per-step inputs the descriptor does not carry (rope tables) and
// enqueues its operations. enqueue() must depend on nothing but the counts, the arena's buffers, the
// cache and the launch values, because a captured graph replays it for other steps of the shape.
#pragma once

#include <cstdint>
#include <vector>

#include "helios/activation_arena.h"
#include "helios/backend.h"
#include "helios/history.h"
#include "helios/step.h"

namespace flare::helios {

// Values a program passes to its launches as arguments rather than through device memory (a
// YaRN attention factor): a graph replays only for steps whose values are the same.
struct StepLaunch {
  std::vector<float> values;
  bool operator==(const StepLaunch&) const = default;
};

struct StepCounts {
  std::int32_t n_tokens = 0;
  std::int32_t n_rows = 0;
  std::int32_t n_logit_rows = 0;
};

class StepProgram {
 public:
  virtual ~StepProgram() = default;
  virtual std::int32_t vocab_size() const = 0;
  // Declares the program's activation buffers (called once, before any step); the program keeps
  // the slots it is given.
  virtual void plan_arena(ArenaPlan& plan) = 0;
  // Throws flare::Error when `layout` is not a set of caches this program's layers can use.
  virtual void check_cache(const HistoryLayout& layout) const = 0;
  // After Backend::begin_step: uploads the step's other inputs (Backend::upload_step_input into
  // arena buffers) and returns its launch values.
  virtual StepLaunch upload(const Step& step, ActivationArena& arena) = 0;
  // Enqueues the step: the tokens' embeddings through every layer to the logits of the rows that
  // want them, left in arena slot k_arena_logits as [n_logit_rows, vocab] F32.
  virtual void enqueue(const StepCounts& counts, ActivationArena& arena, HistoryCaches& caches,
                       const StepLaunch& launch) = 0;
};

}  // namespace flare::helios
