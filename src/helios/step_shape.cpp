// Step shapes and dummy-row padding (see step_shape.h).
#include "helios/step_shape.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/error.h"

namespace flare::helios {
namespace {

void append_dummy_row(Step& step, std::int32_t n_tokens, std::int32_t n_logits, std::int32_t page_size_tokens,
                      std::span<const std::int32_t> scratch_pages) {
  const std::int32_t scratch_page = scratch_pages.front();
  StepRow row;
  row.n_tokens = n_tokens;
  row.start_position = 0;
  row.n_logits = n_logits;
  row.first_block = std::int32_t(step.block_tables.size());
  // Positions p and p + page_size share a slot of the scratch page, which only the dummy's own
  // attention reads.
  row.n_blocks = (n_tokens + page_size_tokens - 1) / page_size_tokens;
  step.block_tables.insert(step.block_tables.end(), std::size_t(row.n_blocks), scratch_page);
  for (std::size_t g = 0; g < step.group_block_tables.size(); ++g) {  // each group's own scratch page
    auto& table = step.group_block_tables[g];
    table.insert(table.end(), std::size_t(row.n_blocks), scratch_pages[std::min(g + 1, scratch_pages.size() - 1)]);
  }
  step.tokens.insert(step.tokens.end(), std::size_t(n_tokens), 0);
  step.rows.push_back(row);
}

}  // namespace

std::string StepShape::describe() const {
  return fmt::format("{} row{} x {} token{}, {} logits row{} each, {} KV", n_rows, n_rows == 1 ? "" : "s",
                     tokens_per_row, tokens_per_row == 1 ? "" : "s", logits_per_row, logits_per_row == 1 ? "" : "s",
                     dtype_name(kv_dtype));
}

std::optional<StepShape> step_shape_of(const Step& step, DType kv_dtype) {
  if (step.rows.empty()) return std::nullopt;
  const StepRow& first = step.rows.front();
  for (const StepRow& row : step.rows) {
    if (row.n_tokens != first.n_tokens || row.n_logits != first.n_logits) return std::nullopt;
  }
  return StepShape{step.n_rows(), first.n_tokens, first.n_logits, kv_dtype};
}

Step step_dummy(const StepShape& shape, std::int32_t page_size_tokens, std::span<const std::int32_t> scratch_pages) {
  const bool scratch_ok =
      !scratch_pages.empty() && std::all_of(scratch_pages.begin(), scratch_pages.end(), [](std::int32_t p) { return p >= 0; });
  if (shape.n_rows < 1 || shape.tokens_per_row < 1 || shape.logits_per_row < 0 ||
      shape.logits_per_row > shape.tokens_per_row || page_size_tokens < 1 || !scratch_ok) {
    fail(ExitCode::failure, "internal: a dummy step of {} (pages of {} tokens, scratch page {})", shape.describe(),
         page_size_tokens, scratch_pages.empty() ? -1 : scratch_pages.front());
  }
  Step step;
  step.group_block_tables.resize(scratch_pages.size() - 1);
  for (std::int32_t r = 0; r < shape.n_rows; ++r) {
    append_dummy_row(step, shape.tokens_per_row, shape.logits_per_row, page_size_tokens, scratch_pages);
  }
  return step;
}

Step step_dummy(const StepShape& shape, std::int32_t page_size_tokens, std::int32_t scratch_page) {
  return step_dummy(shape, page_size_tokens, std::span<const std::int32_t>(&scratch_page, 1));
}

Step step_pad_rows(const Step& step, const StepShape& to, std::int32_t page_size_tokens,
                   std::span<const std::int32_t> scratch_pages) {
  const std::optional<StepShape> from = step_shape_of(step, to.kv_dtype);
  const bool scratch_ok =
      !scratch_pages.empty() && std::all_of(scratch_pages.begin(), scratch_pages.end(), [](std::int32_t p) { return p >= 0; });
  if (!from || from->tokens_per_row != to.tokens_per_row || from->logits_per_row != to.logits_per_row ||
      from->n_rows > to.n_rows || page_size_tokens < 1 || !scratch_ok) {
    fail(ExitCode::failure, "internal: padding a step of {} rows to {} (scratch page {})", step.n_rows(), to.describe(),
         scratch_pages.empty() ? -1 : scratch_pages.front());
  }
  Step out = step;
  out.tokens.reserve(std::size_t(to.n_tokens()));
  out.rows.reserve(std::size_t(to.n_rows));
  for (std::int32_t r = step.n_rows(); r < to.n_rows; ++r) {
    append_dummy_row(out, to.tokens_per_row, to.logits_per_row, page_size_tokens, scratch_pages);
  }
  return out;
}

Step step_pad_rows(const Step& step, const StepShape& to, std::int32_t page_size_tokens, std::int32_t scratch_page) {
  return step_pad_rows(step, to, page_size_tokens, std::span<const std::int32_t>(&scratch_page, 1));
}

}  // namespace flare::helios
