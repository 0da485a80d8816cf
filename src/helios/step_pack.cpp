// Packing of the step descriptor for device backends (see step_pack.h).
#include "helios/step_pack.h"

#include <algorithm>

#include "common/error.h"

namespace flare::helios {

StepPackLayout StepPackLayout::of(const Step& step) {
  const std::size_t n_tokens = step.tokens.size(), n_rows = step.rows.size();
  StepPackLayout l;
  l.tokens = 0;
  l.positions = n_tokens;
  l.token_rows = 2 * n_tokens;
  l.logit_tokens = 3 * n_tokens;
  l.row_first_block = l.logit_tokens + std::size_t(step.n_logit_rows());
  l.block_tables = l.row_first_block + n_rows;
  l.size = l.block_tables + step.block_tables.size();
  return l;
}

std::size_t StepPackLayout::capacity(std::int32_t max_tokens, std::int32_t max_rows, std::int32_t max_blocks) {
  return 4 * std::size_t(std::max(max_tokens, 0)) + std::size_t(std::max(max_rows, 0)) +
         std::size_t(std::max(max_blocks, 0));
}

void step_pack(const Step& step, std::span<std::int32_t> out) {
  const StepPackLayout l = StepPackLayout::of(step);
  if (out.size() < l.size) fail(ExitCode::failure, "internal: packing a step of {} values into {}", l.size, out.size());
  std::copy(step.tokens.begin(), step.tokens.end(), out.begin());
  std::size_t t = 0, logit_row = 0;
  for (std::size_t r = 0; r < step.rows.size(); ++r) {
    const StepRow& row = step.rows[r];
    for (std::int32_t i = 0; i < row.n_tokens; ++i, ++t) {
      out[l.positions + t] = row.start_position + i;
      out[l.token_rows + t] = std::int32_t(r);
      if (i >= row.n_tokens - row.n_logits) out[l.logit_tokens + logit_row++] = std::int32_t(t);
    }
    out[l.row_first_block + r] = row.first_block;
  }
  std::copy(step.block_tables.begin(), step.block_tables.end(), out.begin() + std::ptrdiff_t(l.block_tables));
}

}  // namespace flare::helios
