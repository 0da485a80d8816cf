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
  std::size_t row_first_token = 0;  // [n_rows] index of each row's first token (rows' tokens are consecutive)
  std::size_t block_tables = 0;     // [sum of n_blocks] page ids, row after row
  // History group g's block tables start at block_tables + g * group_stride (group 0's are the
  // step's block_tables): a stride fixed by the backend's capacity, not by the step, so that the
  // groups' addresses too stay put for graph replays.
  std::size_t group_stride = 0;
  std::int32_t n_groups = 1;
  std::size_t size = 0;             // total int32 elements

  // group_stride_blocks: at least the step's sum of n_blocks (0: exactly that).
  static StepPackLayout of(const Step& step, std::int32_t n_groups = 1, std::size_t group_stride_blocks = 0);
  std::size_t group_tables(std::int32_t group) const { return block_tables + std::size_t(group) * group_stride; }
  // The size of the largest packed step within these counts (n_logit_rows <= n_tokens).
  static std::size_t capacity(std::int32_t max_tokens, std::int32_t max_rows, std::int32_t max_blocks,
                              std::int32_t n_groups = 1);
};

// Writes `step` into out[0, layout.size) in `layout`'s order (StepPackLayout::of the step); a
// group the step has no tables for gets a copy of block_tables (Step::table).
void step_pack(const Step& step, const StepPackLayout& layout, std::span<std::int32_t> out);
inline void step_pack(const Step& step, std::span<std::int32_t> out) { step_pack(step, StepPackLayout::of(step), out); }

}  // namespace flare::helios
