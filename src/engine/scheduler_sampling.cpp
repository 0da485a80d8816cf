// The sampling side of the scheduler: what a choice's next token is sampled with, and the per-step
// plan of which logits rows the backend samples (see scheduler.h and sampling_plan.h).
#include <limits>

#include "engine/scheduler.h"
#include "engine/scheduler_state.h"

namespace flare::engine {

helios::SamplingParams Scheduler::choice_sampling_params(const Request& r, const Choice& c,
                                                         std::int32_t vocab_size, std::int32_t n_generated) const {
  helios::SamplingParams params = r.sampling;
  params.seed = scheduler_choice_seed(r.sampling.seed, c.index);
  params.n_top_logprobs = r.request.logprobs ? r.request.top_logprobs : 0;
  const bool constraint_ends = c.constraint && c.constraint->decides_end();
  if (n_generated < r.request.min_tokens && !constraint_ends) {  // as vLLM: stop ids cannot be drawn before min_tokens
    const float never = -std::numeric_limits<float>::infinity();
    for (TokenId id : r.request.stop_token_ids) params.logit_bias.emplace_back(id, never);
    if (!r.request.ignore_eos) {
      for (TokenId id : options_.eos_token_ids) params.logit_bias.emplace_back(id, never);
    }
    std::erase_if(params.logit_bias, [&](const auto& bias) { return bias.first < 0 || bias.first >= vocab_size; });
  }
  return params;
}

SamplingPlan Scheduler::plan_sampling(const StepPlan& plan, std::int32_t vocab_size) const {
  SamplingPlan out;
  // Requests point into these: they must not reallocate.
  out.params.reserve(std::size_t(plan.step.n_logit_rows()));
  out.draft_outputs.reserve(plan.rows.size());
  std::int32_t first = 0;  // the row's first logits row
  for (const ScheduledRow& row : plan.rows) {
    const std::int32_t n_logits = row.n_logits;
    first += n_logits;
    if (n_logits == 0) continue;
    const Request* r = find(row.handle);
    if (r == nullptr || !r->running) continue;  // apply() skips it too
    const Choice& c = r->choices[std::size_t(row.choice_index)];
    if (!c.active()) continue;
    // As apply() will see the row once its tokens are computed.
    const std::int32_t n_computed = c.n_computed + row.n_tokens;
    const bool samples = n_computed == r->known(c);
    const bool forks = !r->all_forked && n_computed == r->n_prompt();
    const bool prompt_logprobs = r->request.prompt_logprobs && !r->prompt_logprobs_sent;
    const auto n_generated = std::int32_t(c.generated.size());
    if (row.n_drafts > 0) {
      // A verify row: position j draws the token after the generated ones and drafts [0, j), as
      // an ordinary step would once those drafts were accepted (same history, same output index,
      // so the same draw); apply() keeps the draws while they equal the drafts.
      auto& output = out.draft_outputs.emplace_back(c.generated);
      output.insert(output.end(), c.drafts.begin(), c.drafts.end());
      for (std::int32_t j = 0; j < n_logits; ++j) {
        out.sampled_rows.push_back(first - n_logits + j);
        out.params.push_back(choice_sampling_params(*r, c, vocab_size, n_generated + j));
        const std::span<const std::int32_t> history = std::span(output).first(std::size_t(n_generated + j));
        out.requests.push_back(helios::SampleRequest{&out.params.back(), {r->request.prompt_token_ids, history},
                                                     std::uint64_t(n_generated + j)});
      }
      continue;
    }
    if (n_logits == 1 && samples && !forks && !prompt_logprobs && !c.constraint) {
      out.sampled_rows.push_back(first - 1);
      out.params.push_back(choice_sampling_params(*r, c, vocab_size, n_generated));
      out.requests.push_back(helios::SampleRequest{&out.params.back(), {r->request.prompt_token_ids, c.generated},
                                                   std::uint64_t(c.generated.size())});
      continue;
    }
    for (std::int32_t j = first - n_logits; j < first; ++j) out.host_rows.push_back(j);
  }
  return out;
}

}  // namespace flare::engine
