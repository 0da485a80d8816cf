// Padding of decode steps to graph buckets (see decode_padding.h).
#include "helios/decode_padding.h"

#include "common/error.h"

namespace flare::helios {

bool step_is_decode(const Step& step) {
  for (const StepRow& row : step.rows) {
    if (row.n_tokens != 1 || row.n_logits != 1) return false;
  }
  return true;
}

std::int32_t decode_bucket_for(const Step& step, std::span<const std::int32_t> buckets) {
  if (step.rows.empty() || !step_is_decode(step)) return 0;
  std::int32_t best = 0;
  for (const std::int32_t bucket : buckets) {
    if (bucket >= step.n_rows() && (best == 0 || bucket < best)) best = bucket;
  }
  return best;
}

Step step_pad_decode(const Step& step, std::int32_t n_rows, std::int32_t scratch_page) {
  if (n_rows < step.n_rows()) fail(ExitCode::failure, "internal: padding {} step rows down to {}", step.n_rows(), n_rows);
  if (scratch_page < 0) fail(ExitCode::failure, "internal: padding a step with scratch page {}", scratch_page);
  Step out = step;
  out.tokens.reserve(std::size_t(n_rows));
  out.rows.reserve(std::size_t(n_rows));
  out.block_tables.reserve(out.block_tables.size() + std::size_t(n_rows - step.n_rows()));
  for (std::int32_t r = step.n_rows(); r < n_rows; ++r) {
    StepRow row;
    row.n_tokens = 1;
    row.start_position = 0;
    row.n_logits = 1;
    row.first_block = std::int32_t(out.block_tables.size());
    row.n_blocks = 1;
    out.block_tables.push_back(scratch_page);
    out.tokens.push_back(0);
    out.rows.push_back(row);
  }
  return out;
}

}  // namespace flare::helios
