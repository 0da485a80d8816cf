// Packing of the step descriptor for device backends (see step_pack.h).
#include "helios/step_pack.h"

#include <algorithm>

#include "common/error.h"

namespace flare::helios {

StepPackLayout StepPackLayout::of(const Step& step, std::int32_t n_groups, std::size_t group_stride_blocks) {
  const std::size_t n_tokens = step.tokens.size(), n_rows = step.rows.size();
  StepPackLayout l;
  l.tokens = 0;
  l.positions = n_tokens;
  l.token_rows = 2 * n_tokens;
  l.logit_tokens = 3 * n_tokens;
  l.row_first_block = l.logit_tokens + std::size_t(step.n_logit_rows());
  l.row_first_token = l.row_first_block + n_rows;
  l.block_tables = l.row_first_token + n_rows;
  l.n_groups = std::max(n_groups, 1);
  l.group_stride = std::max(group_stride_blocks, step.block_tables.size());
  l.size = l.block_tables + std::size_t(l.n_groups - 1) * l.group_stride + step.block_tables.size();
  return l;
}

std::size_t StepPackLayout::capacity(std::int32_t max_tokens, std::int32_t max_rows, std::int32_t max_blocks,
                                     std::int32_t n_groups) {
  return 4 * std::size_t(std::max(max_tokens, 0)) + 2 * std::size_t(std::max(max_rows, 0)) +
         std::size_t(std::max(n_groups, 1)) * std::size_t(std::max(max_blocks, 0));
}

void step_pack(const Step& step, const StepPackLayout& l, std::span<std::int32_t> out) {
  if (out.size() < l.size) fail(ExitCode::failure, "internal: packing a step of {} values into {}", l.size, out.size());
  std::copy(step.tokens.begin(), step.tokens.end(), out.begin());
  std::size_t t = 0, logit_row = 0;
  for (std::size_t r = 0; r < step.rows.size(); ++r) {
    const StepRow& row = step.rows[r];
    out[l.row_first_token + r] = std::int32_t(t);
    for (std::int32_t i = 0; i < row.n_tokens; ++i, ++t) {
      out[l.positions + t] = row.start_position + i;
      out[l.token_rows + t] = std::int32_t(r);
      if (i >= row.n_tokens - row.n_logits) out[l.logit_tokens + logit_row++] = std::int32_t(t);
    }
    out[l.row_first_block + r] = row.first_block;
  }
  for (std::int32_t g = 0; g < l.n_groups; ++g) {
    const std::vector<std::int32_t>& table = step.table(g);
    std::copy(table.begin(), table.end(), out.begin() + std::ptrdiff_t(l.group_tables(g)));
  }
}

}  // namespace flare::helios
