// Where a step's logits rows are consumed: the contract between the scheduler, which decides, and
// the StepRunner, which keeps the logits on the backend. Most rows are a choice drawing its next
// token freely from its own row; the backend samples those where the logits are (CudaBackend: one
// kernel, a small download). A speculative verify row's logits rows are all sampled there too,
// each as the ordinary draw of its position, so its logits never reach the host. The rest need the host: constrained decoding (token rules run on the
// host), prompt logprobs (every prompt row is read), the prompt row that n > 1 choices fork from
// (several draws from one row); the runner downloads only those rows. Plain data, engine thread only.
#pragma once

#include <cstdint>
#include <vector>

#include "helios/backend.h"
#include "helios/sampling.h"

namespace flare::engine {

struct SamplingPlan {
  // Logits rows the backend samples, ascending, each with its request (parallel).
  std::vector<std::int32_t> sampled_rows;
  std::vector<helios::SampleRequest> requests;  // [sampled_rows.size()]
  // What requests point at: their parameters here, their histories in the scheduler's requests.
  // Valid until Scheduler::apply() appends the step's tokens; reserved before filling, so moving
  // the plan keeps the pointers (copying it does not: a copy's requests still name the original).
  std::vector<helios::SamplingParams> params;
  // The histories of verify rows' draft positions: a choice's generated tokens then its drafts
  // (position j's request sees the first n_generated + j).
  std::vector<std::vector<std::int32_t>> draft_outputs;
  // Logits rows the host reads in Scheduler::apply(), ascending. The scheduler's plans keep the
  // two lists disjoint; a row in both is sampled and downloaded (a test compares the draws).
  std::vector<std::int32_t> host_rows;
};

// What StepRunner::run hands back for a plan.
struct StepResults {
  std::vector<helios::SampledToken> sampled;  // [plan.sampled_rows.size()], in plan order
  std::vector<float> host_logits;             // [plan.host_rows.size(), vocab] f32, in plan order
};

// Every logits row to the host, none sampled (callers that want the raw logits).
SamplingPlan sampling_plan_host_only(std::int32_t n_logit_rows);

// Checks a plan against a step of n_logit_rows logits rows (a programmer fault aborts with
// flare::Error failure): rows in range, each list ascending, one request per sampled row.
void sampling_plan_validate(const SamplingPlan& plan, std::int32_t n_logit_rows);

// Calls visit(first, n, offset) for each run of consecutive rows in an ascending list: rows
// [first, first + n) are entries [offset, offset + n) of the list. The runner samples and
// downloads run by run, so a plan of consecutive rows costs one call each.
template <typename Visit>
void sampling_plan_runs(const std::vector<std::int32_t>& rows, Visit&& visit) {
  std::size_t begin = 0;
  for (std::size_t i = 1; i <= rows.size(); ++i) {
    if (i < rows.size() && rows[i] == rows[i - 1] + 1) continue;
    if (i > begin) visit(rows[begin], std::int32_t(i - begin), begin);
    begin = i;
  }
}

}  // namespace flare::engine
