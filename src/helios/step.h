// The plain-data contract between the engine's scheduler and the executor: which rows run this
// step, which tokens each computes, from which position, over which KV pages. A prefill chunk and
// a decode row are the same thing here (a row with n_tokens >= 1), so one step mixes both.
// Nothing in this file allocates on a device; a backend uploads it in Backend::begin_step.
#pragma once

#include <cstdint>
#include <vector>

namespace flare::helios {

struct StepRow {
  std::int32_t n_tokens = 0;        // tokens this row computes this step (>= 1)
  std::int32_t start_position = 0;  // position of its first token (= tokens already in its cache)
  std::int32_t n_logits = 1;        // logits wanted for its last n_logits tokens (0..n_tokens)
  std::int32_t first_block = 0;     // offset of its block table in Step::block_tables
  std::int32_t n_blocks = 0;        // pages covering positions [0, start_position + n_tokens)
};

struct Step {
  std::vector<std::int32_t> tokens;        // [sum of n_tokens] the rows' tokens, row after row
  std::vector<StepRow> rows;               // [n_rows]
  std::vector<std::int32_t> block_tables;  // [sum of n_blocks] page ids, row after row

  std::int32_t n_tokens() const { return std::int32_t(tokens.size()); }
  std::int32_t n_rows() const { return std::int32_t(rows.size()); }
  std::int32_t n_logit_rows() const {
    std::int32_t n = 0;
    for (const auto& row : rows) n += row.n_logits;
    return n;
  }
};

// Checks that the step is self-consistent against a cache of n_pages pages of page_size tokens
// (token counts, logits counts, block ranges, page ids); throws flare::Error naming the problem.
void step_validate(const Step& step, std::int32_t n_pages, std::int32_t page_size_tokens);

}  // namespace flare::helios
