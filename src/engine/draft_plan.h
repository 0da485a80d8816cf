// Learned drafts: the contract between the scheduler, which decides which rows a draft model
// proposes for, and the StepRunner that owns the draft model. A draft model keeps its own KV
// cache over the same page ids as the target (one page table per sequence, two caches), and
// follows every sequence the target computes: each step, before the target runs, the draft's
// first forward computes what the draft has not seen of each scheduled row (a prefill chunk, the
// tokens a previous round accepted, a row's history drafts) and, for a row it drafts for, ends at
// the pending token with one logits row: its argmax is the first draft. Each further draft is one
// more one-token forward per drafting row (draft_proposal_run). Drafts are the draft's argmax, so
// they are deterministic: the target's verification needs no draft probabilities. Plain data.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "helios/step.h"

namespace flare::engine {

struct DraftPlan {
  helios::Step step;  // the draft model's first forward this step (rows as the target's, in order)
  // Per logits row of `step` (one per drafting row, in order): the target row (index into
  // StepPlan::rows) it drafts for, and how many drafts it wants (>= 1).
  std::vector<std::int32_t> target_rows;
  std::vector<std::int32_t> n_drafts;
  bool empty() const { return step.rows.empty(); }
};

// One greedy draft forward: the argmax token of each logits row of the step, in order.
using DraftForward = std::function<std::vector<std::int32_t>(const helios::Step& step)>;

// Runs the plan's first forward, then one-token forwards of the rows that want more drafts (each
// reading the draft's previous token at the next position, over the row's whole page table, which
// the scheduler allocated for the verify row). out[i]: the drafts of logits row i.
void draft_proposal_run(const DraftPlan& plan, const DraftForward& forward, std::vector<std::vector<std::int32_t>>& out);

}  // namespace flare::engine
