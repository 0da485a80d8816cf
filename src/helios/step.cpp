// Validation of the step descriptor (step.h): the executor never trusts the scheduler's arithmetic.
#include "helios/step.h"

#include <fmt/format.h>

#include "common/error.h"

namespace flare::helios {

void step_validate(const Step& step, std::int32_t n_pages, std::int32_t page_size_tokens) {
  step_validate(step, std::span<const std::int32_t>(&n_pages, 1), page_size_tokens);
}

void step_validate(const Step& step, std::span<const std::int32_t> n_pages, std::int32_t page_size_tokens) {
  if (n_pages.empty()) fail(ExitCode::failure, "internal: a step checked against no KV cache");
  if (step.group_block_tables.size() >= n_pages.size()) {
    fail_input("step: block tables for {} history groups, the caches hold {}", step.group_block_tables.size() + 1,
               n_pages.size());
  }
  for (const auto& table : step.group_block_tables) {
    if (table.size() != step.block_tables.size()) {
      fail_input("step: a history group's block tables hold {} pages, the first group's {}", table.size(),
                 step.block_tables.size());
    }
  }
  std::int64_t n_tokens = 0;
  for (std::size_t r = 0; r < step.rows.size(); ++r) {
    const StepRow& row = step.rows[r];
    if (row.n_tokens < 1) fail_input("step row {}: n_tokens {} < 1", r, row.n_tokens);
    if (row.start_position < 0) fail_input("step row {}: negative start position", r);
    if (row.n_logits < 0 || row.n_logits > row.n_tokens) {
      fail_input("step row {}: n_logits {} outside 0..{}", r, row.n_logits, row.n_tokens);
    }
    const std::int64_t n_positions = std::int64_t(row.start_position) + row.n_tokens;
    const std::int64_t n_needed = (n_positions + page_size_tokens - 1) / page_size_tokens;
    if (row.n_blocks < n_needed) {
      fail_input("step row {}: {} pages cover fewer than its {} positions", r, row.n_blocks, n_positions);
    }
    if (row.first_block < 0 || std::int64_t(row.first_block) + row.n_blocks > std::int64_t(step.block_tables.size())) {
      fail_input("step row {}: block table range outside the step's block tables", r);
    }
    for (std::size_t g = 0; g < n_pages.size(); ++g) {
      const std::vector<std::int32_t>& table = step.table(std::int32_t(g));
      for (std::int32_t b = 0; b < row.n_blocks; ++b) {
        const std::int32_t page = table[std::size_t(row.first_block + b)];
        if (page < 0 || page >= n_pages[g]) {
          fail_input("step row {}: page id {} outside 0..{}{}", r, page, n_pages[g] - 1,
                     g == 0 ? "" : fmt::format(" (history group {})", g));
        }
      }
    }
    n_tokens += row.n_tokens;
  }
  if (n_tokens != std::int64_t(step.tokens.size())) {
    fail_input("step: rows hold {} tokens but the step carries {}", n_tokens, step.tokens.size());
  }
}

}  // namespace flare::helios
