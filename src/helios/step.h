// The plain-data contract between the engine's scheduler and the executor: which rows run this
// step, which tokens each computes, from which position, over which KV pages. A prefill chunk and
// a decode row are the same thing here (a row with n_tokens >= 1), so one step mixes both.
// Nothing in this file allocates on a device; a backend uploads it in Backend::begin_step.
#pragma once

#include <cstdint>
#include <span>
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
  // A model whose layers keep several kinds of history (history.h) has a cache per group; group g
  // >= 1 reads its page ids from group_block_tables[g - 1], laid out exactly as block_tables (same
  // row offsets, one entry per block). A sliding-window group gives back pages its window left
  // behind, so its entries there name a scratch page nothing reads. A group without tables of its
  // own (tests, benchmarks, preparation) uses block_tables' page ids.
  std::vector<std::vector<std::int32_t>> group_block_tables;

  const std::vector<std::int32_t>& table(std::int32_t group) const {
    return group > 0 && std::size_t(group) <= group_block_tables.size() ? group_block_tables[std::size_t(group) - 1]
                                                                         : block_tables;
  }

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
// The same for a model of several history groups: n_pages[g] pages in group g's cache; group
// tables beyond n_pages.size() are an error.
void step_validate(const Step& step, std::span<const std::int32_t> n_pages, std::int32_t page_size_tokens);

}  // namespace flare::helios
