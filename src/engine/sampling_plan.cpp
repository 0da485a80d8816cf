// Plan helpers (see sampling_plan.h).
#include "engine/sampling_plan.h"

#include <algorithm>

#include "common/error.h"

namespace flare::engine {
namespace {

void check_rows(const std::vector<std::int32_t>& rows, std::int32_t n_logit_rows, const char* what) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= n_logit_rows || (i > 0 && rows[i] <= rows[i - 1])) {
      fail(ExitCode::failure, "internal: {} row {} of a step with {} logits rows (entry {}, not ascending or out of range)",
           what, rows[i], n_logit_rows, i);
    }
  }
}

}  // namespace

SamplingPlan sampling_plan_host_only(std::int32_t n_logit_rows) {
  SamplingPlan plan;
  plan.host_rows.reserve(std::size_t(std::max(n_logit_rows, 0)));
  for (std::int32_t row = 0; row < n_logit_rows; ++row) plan.host_rows.push_back(row);
  return plan;
}

void sampling_plan_validate(const SamplingPlan& plan, std::int32_t n_logit_rows) {
  check_rows(plan.sampled_rows, n_logit_rows, "sampled");
  check_rows(plan.host_rows, n_logit_rows, "host");
  if (plan.requests.size() != plan.sampled_rows.size()) {
    fail(ExitCode::failure, "internal: {} sampling requests for {} sampled rows", plan.requests.size(),
         plan.sampled_rows.size());
  }
  for (const helios::SampleRequest& request : plan.requests) {
    if (request.params == nullptr) fail(ExitCode::failure, "internal: a sampling request without parameters");
  }
}

}  // namespace flare::engine
