// The step descriptor (step.h) packed into one int32 array for a device backend, in an order
// chosen so that a captured CUDA graph can be replayed over later steps: the offset of every
// array depends only on the step's shape (n_tokens, n_rows, n_logit_rows), never on how many
// pages its rows span, because the block tables (the one variable-length part) come last. A graph
// captured for one shape therefore reads every later step of that shape at the same addresses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "helios/step.h"

namespace flare::helios {

// Offsets, in int32 elements from the start of the packed array, of each per-step array.
struct StepPackLayout {
  std::size_t tokens = 0;           // [n_tokens] token ids
  std::size_t positions = 0;        // [n_tokens] position of each token
  std::size_t token_rows = 0;       // [n_tokens] step row of each token
  std::size_t logit_tokens = 0;     // [n_logit_rows] token index of each logits row
  std::size_t row_first_block = 0;  // [n_rows] offset of each row's block table in block_tables
  std::size_t block_tables = 0;     // [sum of n_blocks] page ids, row after row
  std::size_t size = 0;             // total int32 elements

  static StepPackLayout of(const Step& step);
  // The size of the largest packed step within these counts (n_logit_rows <= n_tokens).
  static std::size_t capacity(std::int32_t max_tokens, std::int32_t max_rows, std::int32_t max_blocks);
};

// Writes `step` into out[0, layout.size) in StepPackLayout::of(step)'s order.
void step_pack(const Step& step, std::span<std::int32_t> out);

}  // namespace flare::helios
