// The steps a benchmark runs, as plain helios::Step values: `batch` rows of the same shape, each
// computing `n_tokens` tokens after `start_position` cached ones, row r owning its own consecutive
// pages [r * blocks, (r + 1) * blocks). A decode step at context C is uniform_step(B, 1, C): each
// row attends C + 1 positions; a prefill step is uniform_step(1, P, 0).
#pragma once

#include <cstdint>

#include "helios/step.h"

namespace flare::bench {

struct StepShape {
  std::int32_t batch = 1;
  std::int32_t n_tokens = 1;        // per row
  std::int32_t start_position = 0;  // per row
  std::int32_t page_size_tokens = 16;

  std::int32_t blocks_per_row() const;
  std::int32_t n_pages() const { return batch * blocks_per_row(); }
};

// Tokens are uniform in [0, vocab_size) from `seed`; each row asks for its last token's logits.
helios::Step uniform_step(const StepShape& shape, std::int32_t vocab_size, std::uint64_t seed);

}  // namespace flare::bench
