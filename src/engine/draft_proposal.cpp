// The draft model's proposal loop over a DraftPlan (see draft_plan.h).
#include <algorithm>

#include "common/error.h"
#include "engine/draft_plan.h"

namespace flare::engine {

void draft_proposal_run(const DraftPlan& plan, const DraftForward& forward, std::vector<std::vector<std::int32_t>>& out) {
  const std::size_t n = plan.target_rows.size();
  if (plan.n_drafts.size() != n || std::int64_t(n) != plan.step.n_logit_rows()) {
    fail(ExitCode::failure, "internal: a draft plan of {} logits rows drafts for {} rows", plan.step.n_logit_rows(), n);
  }
  out.assign(n, {});
  if (n == 0) {
    if (!plan.empty()) forward(plan.step);  // rows the draft only follows
    return;
  }
  // The drafting rows of the first forward: each one's logits row is its last token (the pending one).
  std::vector<const helios::StepRow*> rows;
  for (const auto& row : plan.step.rows) {
    if (row.n_logits == 1) rows.push_back(&row);
    else if (row.n_logits != 0) fail(ExitCode::failure, "internal: a draft row with {} logits rows", row.n_logits);
  }
  std::vector<std::int32_t> tokens = forward(plan.step);
  if (tokens.size() != n) fail(ExitCode::failure, "internal: the draft forward gave {} tokens for {} rows", tokens.size(), n);
  for (std::size_t i = 0; i < n; ++i) out[i].push_back(tokens[i]);
  const std::int32_t most = *std::max_element(plan.n_drafts.begin(), plan.n_drafts.end());
  helios::Step next;
  std::vector<std::size_t> drafting;
  for (std::int32_t d = 1; d < most; ++d) {
    next.tokens.clear();
    next.rows.clear();
    next.block_tables.clear();
    drafting.clear();
    for (std::size_t i = 0; i < n; ++i) {
      if (plan.n_drafts[i] <= d) continue;
      const helios::StepRow& first = *rows[i];
      helios::StepRow row;
      row.n_tokens = 1;
      row.start_position = first.start_position + first.n_tokens - 1 + d;  // the pending token's, plus d
      row.n_logits = 1;
      row.first_block = std::int32_t(next.block_tables.size());
      row.n_blocks = first.n_blocks;
      next.block_tables.insert(next.block_tables.end(), plan.step.block_tables.begin() + first.first_block,
                               plan.step.block_tables.begin() + first.first_block + first.n_blocks);
      next.rows.push_back(row);
      next.tokens.push_back(out[i].back());
      drafting.push_back(i);
    }
    tokens = forward(next);
    if (tokens.size() != drafting.size()) fail(ExitCode::failure, "internal: the draft forward gave {} tokens", tokens.size());
    for (std::size_t j = 0; j < drafting.size(); ++j) out[drafting[j]].push_back(tokens[j]);
  }
}

}  // namespace flare::engine
