// After a step: computed counts, prompt checkpoints, the fork of n > 1 choices, tokens (drawn on
// the backend, or sampled here from the host rows), stop conditions, retirement and outputs; and
// cancellation (see scheduler.h).
#include <cmath>
#include <limits>

#include "common/error.h"
#include "engine/constrained_sampling.h"
#include "engine/scheduler.h"
#include "engine/scheduler_state.h"

namespace flare::engine {
namespace {

bool contains(const std::vector<TokenId>& ids, TokenId token) {
  return std::find(ids.begin(), ids.end(), token) != ids.end();
}

}  // namespace

// Choice 0 keeps the request's seed, so n = 1 and n > 1 agree on it.
std::uint64_t scheduler_choice_seed(std::uint64_t seed, std::int32_t choice_index) {
  if (choice_index == 0) return seed;
  std::uint64_t x = seed + 0x9e3779b97f4a7c15ull * std::uint64_t(choice_index);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void Scheduler::fork_choices(Request& r, Choice& lead) {
  for (auto& c : r.choices) {
    if (&c == &lead || !c.active()) continue;
    c.pages = lead.pages.fork();
    c.n_computed = lead.n_computed;
    c.n_draft_computed = lead.n_draft_computed;
    c.forked = true;
  }
  r.all_forked = true;
}

void Scheduler::add_prompt_logprobs(Request& r, std::int32_t first_position, std::int32_t n_logits,
                                    std::span<const float> logits, std::int32_t vocab_size) {
  if (r.prompt_logprobs.empty() && first_position == 0) {
    r.prompt_logprobs.push_back(TokenOutput{r.request.prompt_token_ids[0], 0.0f, {}});  // no context: 0
  }
  helios::SamplingParams greedy;  // only for the raw logprobs sample_token reports
  greedy.temperature = 0.0f;
  greedy.n_top_logprobs = r.request.top_logprobs;
  for (std::int32_t j = 0; j < n_logits; ++j) {
    const std::int32_t next = first_position + j + 1;  // the prompt position these logits predict
    if (next >= r.n_prompt() || next != std::int32_t(r.prompt_logprobs.size())) continue;
    auto row = logits.subspan(std::size_t(j) * std::size_t(vocab_size), std::size_t(vocab_size));
    const TokenId token = r.request.prompt_token_ids[std::size_t(next)];
    const helios::SampledToken top = greedy.n_top_logprobs > 0 ? helios::sample_token(row, greedy, {}, 0)
                                                                : helios::SampledToken{};
    float max_logit = -std::numeric_limits<float>::infinity();
    for (float x : row) max_logit = std::max(max_logit, x);
    double sum = 0.0;
    for (float x : row) sum += std::exp(double(x) - max_logit);
    TokenOutput out{token, float(double(row[std::size_t(token)]) - max_logit - std::log(sum)), {}};
    for (const auto& [id, logprob] : top.top_logprobs) out.top_logprobs.push_back(TokenLogprob{id, logprob});
    r.prompt_logprobs.push_back(std::move(out));
  }
}

void Scheduler::sample_choice(Request& r, Choice& c, std::span<const float> logits) {
  const auto n_generated = std::int32_t(c.generated.size());
  const helios::SamplingParams params = choice_sampling_params(r, c, std::int32_t(logits.size()), n_generated);
  const helios::TokenHistory history{r.request.prompt_token_ids, c.generated};
  if (!c.constraint) {
    record_token(r, c, helios::sample_token(logits, params, history, std::uint64_t(n_generated)));
    return;
  }
  const std::int32_t n_left = std::min(r.request.max_tokens - n_generated, options_.context_limit - r.n_prompt() - n_generated);
  const TokenRule rule = c.constraint->next(std::max(n_left, 1));
  const helios::SampledToken sampled = sample_constrained(rule, logits, params, history, std::uint64_t(n_generated));
  c.constraint->accept(sampled.token);
  record_token(r, c, sampled);
}

void Scheduler::record_token(Request& r, Choice& c, const helios::SampledToken& sampled) {
  c.generated.push_back(sampled.token);
  TokenOutput out{sampled.token, sampled.logprob, {}};
  for (const auto& [id, logprob] : sampled.top_logprobs) out.top_logprobs.push_back(TokenLogprob{id, logprob});
  c.new_tokens.push_back(std::move(out));
  const auto n_after = std::int32_t(c.generated.size());
  if (c.constraint && c.constraint->finished()) {  // the constrained text is complete
    finish_choice(r, c, FinishReason::stop, -1);
    return;
  }
  const bool constraint_ends = c.constraint && c.constraint->decides_end();
  if (!constraint_ends && n_after >= r.request.min_tokens) {  // else the constraint decides where the text ends
    if (contains(r.request.stop_token_ids, sampled.token) ||
        (!r.request.ignore_eos && contains(options_.eos_token_ids, sampled.token))) {
      finish_choice(r, c, FinishReason::stop, sampled.token);
      return;
    }
  }
  if (n_after >= r.request.max_tokens || r.n_prompt() + n_after >= options_.context_limit) {
    finish_choice(r, c, FinishReason::length, -1);
  }
}

void Scheduler::finish_choice(Request& r, Choice& c, FinishReason reason, TokenId stop_token) {
  const bool was_lead = &c == r.lead();
  c.finish = reason;
  c.stop_token = stop_token;
  if (c.pages.n_tokens() == 0) return;
  if (!r.all_forked && was_lead && r.lead() != nullptr) {
    // The prompt's pages pass to the next lead (before the fork they hold only prompt tokens).
    Choice& next = *r.lead();
    next.pages = std::move(c.pages);
    next.n_computed = c.n_computed;
    next.n_draft_computed = c.n_draft_computed;
    next.forked = true;
    c.n_computed = 0;
    if (r.n_active() == 1) r.all_forked = true;
    return;
  }
  // Answer boundary: keep the computed history for a later turn that repeats it.
  std::vector<TokenId> history = r.request.prompt_token_ids;
  history.insert(history.end(), c.generated.begin(), c.generated.end());
  history.resize(std::size_t(std::min<std::int32_t>(n_checkpointable(c), std::int32_t(history.size()))));
  prefix_cache_->insert(history, c.pages);
  c.pages.free();
  c.n_computed = 0;
}

void Scheduler::collect_outputs(Request& r, std::vector<RequestOutputs>& out) {
  RequestOutputs outputs{r.handle, {}};
  Usage usage;
  usage.n_prompt_tokens = r.n_prompt();
  usage.n_cached_prompt_tokens = std::max(r.n_cached_prompt_tokens, 0);
  for (const auto& c : r.choices) usage.n_generated_tokens += std::int32_t(c.generated.size());
  for (auto& c : r.choices) {
    const bool report_finish = !c.active() && !c.finish_reported;
    if (c.new_tokens.empty() && !report_finish) continue;
    StepOutput o;
    o.choice_index = c.index;
    o.tokens = std::move(c.new_tokens);
    c.new_tokens.clear();
    if (r.request.prompt_logprobs && !r.prompt_logprobs_sent) {
      o.prompt_tokens = std::move(r.prompt_logprobs);
      r.prompt_logprobs.clear();
      r.prompt_logprobs_sent = true;
    }
    if (report_finish) {
      o.finish_reason = c.finish;
      o.stop_token_id = c.stop_token;
      if (c.finish == FinishReason::error) {
        o.error_message = r.error_message;
        o.capacity_error = r.error_is_capacity;
      }
      c.finish_reported = true;
    }
    o.usage = usage;
    outputs.outputs.push_back(std::move(o));
  }
  if (r.n_active() == 0) {
    if (outputs.outputs.empty()) {  // every finish was reported already: close the stream
      StepOutput o;
      o.choice_index = r.choices.back().index;
      o.finish_reason = r.choices.back().finish;
      o.usage = usage;
      outputs.outputs.push_back(std::move(o));
    }
    outputs.outputs.back().request_finished = true;
    remove(r);  // r is gone from here on
  }
  if (!outputs.outputs.empty()) out.push_back(std::move(outputs));
}

std::vector<RequestOutputs> Scheduler::apply(const StepPlan& plan, const SamplingPlan& sampling,
                                             const StepResults& results, std::int32_t vocab_size) {
  const std::int32_t n_logit_rows = plan.step.n_logit_rows();
  sampling_plan_validate(sampling, n_logit_rows);
  if (vocab_size < 1 || results.sampled.size() != sampling.sampled_rows.size() ||
      results.host_logits.size() != sampling.host_rows.size() * std::size_t(vocab_size)) {
    fail(ExitCode::failure, "internal: {} sampled tokens and {} host logits for a plan of {} sampled and {} host rows "
         "of a vocabulary of {}", results.sampled.size(), results.host_logits.size(), sampling.sampled_rows.size(),
         sampling.host_rows.size(), vocab_size);
  }
  // Per logits row: its entry in results.sampled, or in the host rows, or -1.
  std::vector<std::int32_t> sampled_slot(std::size_t(n_logit_rows), -1), host_slot(std::size_t(n_logit_rows), -1);
  for (std::size_t i = 0; i < sampling.sampled_rows.size(); ++i) sampled_slot[std::size_t(sampling.sampled_rows[i])] = std::int32_t(i);
  for (std::size_t i = 0; i < sampling.host_rows.size(); ++i) host_slot[std::size_t(sampling.host_rows[i])] = std::int32_t(i);
  // The host logits of logits rows [first, first + n), which the plan must have downloaded together.
  auto host_logits = [&](std::int32_t first, std::int32_t n) {
    const std::int32_t slot = host_slot[std::size_t(first)];
    if (slot < 0 || host_slot[std::size_t(first + n - 1)] != slot + n - 1) {
      fail(ExitCode::failure, "internal: logits rows {}..{} were not downloaded for the host", first, first + n - 1);
    }
    return std::span<const float>(results.host_logits)
        .subspan(std::size_t(slot) * std::size_t(vocab_size), std::size_t(n) * std::size_t(vocab_size));
  };

  std::vector<Request*> touched;
  std::int32_t first = 0;  // the row's first logits row
  for (const ScheduledRow& row : plan.rows) {
    const std::int32_t row_first = first;
    first += row.n_logits;
    Request* r = find(row.handle);
    if (r == nullptr || !r->running) continue;  // retired between schedule and apply
    Choice& c = r->choices[std::size_t(row.choice_index)];
    if (!c.active()) continue;
    if (r->touched_step != counters_.n_steps) {
      r->touched_step = counters_.n_steps;
      touched.push_back(r);
    }
    if (row.n_drafts > 0) {
      const std::int32_t slot = sampled_slot[std::size_t(row_first)];
      if (slot < 0 || std::size_t(slot) + std::size_t(row.n_logits) > results.sampled.size() ||
          std::int32_t(c.drafts.size()) != row.n_drafts) {
        fail(ExitCode::failure, "internal: a verify row of {} drafts was not sampled as planned", row.n_drafts);
      }
      apply_verify_row(*r, c, std::span(results.sampled).subspan(std::size_t(slot), std::size_t(row.n_logits)));
      continue;
    }
    const std::int32_t start = c.n_computed;
    c.n_computed += row.n_tokens;
    if (options_.learned_drafts) c.n_draft_computed = std::min(c.draft_end, c.n_computed);
    if (r->request.prompt_logprobs && !r->prompt_logprobs_sent && row.n_logits > 0) {
      add_prompt_logprobs(*r, start + row.n_tokens - row.n_logits, row.n_logits, host_logits(row_first, row.n_logits),
                          vocab_size);
    }
    if (!r->prompt_checkpointed && c.n_computed >= r->n_prompt()) {
      const auto n_prompt_cached = std::size_t(std::min(r->n_prompt(), n_checkpointable(c)));
      prefix_cache_->insert(std::span(r->request.prompt_token_ids).first(n_prompt_cached), c.pages);  // prompt boundary
      r->prompt_checkpointed = true;
    }
    const bool forking = !r->all_forked && c.n_computed == r->n_prompt();
    if (forking) fork_choices(*r, c);
    if (row.n_logits == 0 || c.n_computed != r->known(c)) continue;
    const std::int32_t last = first - 1;
    if (const std::int32_t slot = sampled_slot[std::size_t(last)]; slot >= 0 && !forking) {
      record_token(*r, c, results.sampled[std::size_t(slot)]);  // drawn on the backend
      continue;
    }
    const std::span<const float> logits = host_logits(last, 1);
    if (!forking) {
      sample_choice(*r, c, logits);
      continue;
    }
    for (auto& other : r->choices) {  // the fork's first tokens all come from the prompt's logits
      if (other.active() && other.n_computed == r->known(other)) sample_choice(*r, other, logits);
    }
  }
  std::vector<RequestOutputs> out;
  for (Request* r : touched) collect_outputs(*r, out);
  return out;
}

std::vector<RequestOutputs> Scheduler::retire(Request& r, FinishReason reason, const std::string& message) {
  r.error_message = message;
  for (auto& c : r.choices) {
    if (c.active()) finish_choice(r, c, reason, -1);
  }
  std::vector<RequestOutputs> out;
  collect_outputs(r, out);
  return out;
}

std::vector<RequestOutputs> Scheduler::cancel(RequestHandle handle) {
  Request* r = find(handle);
  if (r == nullptr) return {};
  return retire(*r, FinishReason::abort, "");
}

std::vector<RequestOutputs> Scheduler::cancel_choice(RequestHandle handle, std::int32_t choice_index) {
  Request* r = find(handle);
  if (r == nullptr || choice_index < 0 || choice_index >= std::int32_t(r->choices.size())) return {};
  Choice& c = r->choices[std::size_t(choice_index)];
  if (!c.active()) return {};
  finish_choice(*r, c, FinishReason::abort, -1);
  std::vector<RequestOutputs> out;
  collect_outputs(*r, out);
  return out;
}

std::vector<RequestOutputs> Scheduler::fail_all(const std::string& message) {
  std::vector<RequestOutputs> out;
  while (!running_.empty() || !waiting_.empty()) {
    Request& r = running_.empty() ? *waiting_.front() : *running_.front();
    auto part = retire(r, FinishReason::error, message);
    for (auto& p : part) out.push_back(std::move(p));
  }
  return out;
}

}  // namespace flare::engine
