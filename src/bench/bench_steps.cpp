#include "bench/bench_steps.h"

#include <random>

#include "common/error.h"

namespace flare::bench {

std::int32_t StepShape::blocks_per_row() const {
  return std::int32_t((std::int64_t(start_position) + n_tokens + page_size_tokens - 1) / page_size_tokens);
}

helios::Step uniform_step(const StepShape& shape, std::int32_t vocab_size, std::uint64_t seed) {
  if (shape.batch < 1 || shape.n_tokens < 1 || shape.start_position < 0 || shape.page_size_tokens < 1 || vocab_size < 1) {
    fail(ExitCode::failure, "internal: bench step of {} rows x {} tokens from {}", shape.batch, shape.n_tokens,
         shape.start_position);
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int32_t> token(0, vocab_size - 1);
  helios::Step step;
  const std::int32_t blocks = shape.blocks_per_row();
  for (std::int32_t r = 0; r < shape.batch; ++r) {
    helios::StepRow row;
    row.n_tokens = shape.n_tokens;
    row.start_position = shape.start_position;
    row.n_logits = 1;
    row.first_block = r * blocks;
    row.n_blocks = blocks;
    step.rows.push_back(row);
    for (std::int32_t i = 0; i < shape.n_tokens; ++i) step.tokens.push_back(token(rng));
    for (std::int32_t b = 0; b < blocks; ++b) step.block_tables.push_back(r * blocks + b);
  }
  return step;
}

}  // namespace flare::bench
