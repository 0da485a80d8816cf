// The scheduler's per-request state (private to scheduler*.cpp): a request's choices, each with
// its generated tokens, computed count and pages. Positions [0, n_prompt) are the prompt's tokens,
// [n_prompt, known) the choice's generated tokens; pages cover [0, n_computed).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/history_drafts.h"
#include "engine/scheduler.h"
#include "engine/verify_policy.h"

namespace flare::engine {

struct Scheduler::Choice {
  Choice(helios::HistoryPools& pools, std::int32_t page_size_tokens, std::int32_t index_)
      : index(index_), pages(pools, page_size_tokens) {}

  std::int32_t index = 0;
  std::vector<TokenId> generated;
  std::vector<TokenOutput> new_tokens;  // sampled since the last outputs
  helios::HistoryPages pages;
  std::int32_t n_computed = 0;
  bool forked = false;  // holds its own pages (the lead from admission, the others from the fork)
  FinishReason finish = FinishReason::none;
  TokenId stop_token = -1;
  bool finish_reported = false;
  double terminal_since_ms = -1.0;
  std::int32_t n_skipped_steps = 0;
  std::int64_t scheduled_stamp = -1;  // the schedule() call that last gave it a row
  std::unique_ptr<TokenConstraint> constraint;  // this choice's copy of request.constraint, or null
  // Speculation: the drafts this step's row verifies (tokens after the known ones; empty for an
  // ordinary row), and the choice's history-draft index (created at its first proposal).
  std::vector<TokenId> drafts;
  std::unique_ptr<HistoryDrafts> history_drafts;
  bool drafts_learned = false;
  AcceptanceEstimate acceptance;  // of its drafts, for adaptive verification  // drafts holds placeholders the draft model fills (fill_drafts)
  // With a draft model: positions whose draft-model KV is in the pages (at most n_computed once a
  // step is applied), and how far this step's draft forwards write.
  std::int32_t n_draft_computed = 0;
  std::int32_t draft_end = 0;

  bool active() const { return finish == FinishReason::none; }
};

struct Scheduler::Request {
  RequestHandle handle = 0;
  GenerationRequest request;
  helios::SamplingParams sampling;  // seed: choice 0's
  std::vector<Choice> choices;
  bool running = false;
  bool all_forked = false;       // every active choice has its own pages
  bool prompt_checkpointed = false;
  std::int64_t arrival = 0;
  std::int64_t admission = 0;
  double arrival_ms = 0.0;
  std::int32_t n_cached_prompt_tokens = -1;  // set at the first admission
  std::vector<TokenOutput> prompt_logprobs;
  bool prompt_logprobs_sent = false;
  std::string error_message;
  bool error_is_capacity = false;  // error_message is a capacity error (StepOutput::capacity_error)
  std::int64_t touched_step = -1;     // the last apply() that ran one of its rows
  std::int64_t scheduled_stamp = -1;  // the schedule() call that last gave it a row
  std::int64_t unfit_stamp = -1;      // the schedule() call that found the pool cannot hold it

  std::int32_t n_prompt() const { return std::int32_t(request.prompt_token_ids.size()); }
  std::int32_t known(const Choice& c) const { return n_prompt() + std::int32_t(c.generated.size()); }
  // Where the choice's computation may go this step: the prompt's end until the choices fork.
  std::int32_t target(const Choice& c) const { return all_forked ? known(c) : std::min(known(c), n_prompt()); }
  TokenId token_at(const Choice& c, std::int32_t position) const {
    return position < n_prompt() ? request.prompt_token_ids[std::size_t(position)]
                                 : c.generated[std::size_t(position - n_prompt())];
  }
  Choice* lead() {
    for (auto& c : choices) {
      if (c.active()) return &c;
    }
    return nullptr;
  }
  std::int32_t n_active() const {
    return std::int32_t(std::count_if(choices.begin(), choices.end(), [](const Choice& c) { return c.active(); }));
  }
  std::int32_t n_pages_held() const {
    std::int32_t n = 0;
    for (const auto& c : choices) n += c.pages.n_held();
    return n;
  }
  // Drafts a row of this choice may verify now: the next tokens it may still emit, less the one
  // the row emits anyway (max_tokens and the context end).
  std::int32_t draft_room(const Choice& c, std::int32_t context_limit) const {
    const auto n_generated = std::int32_t(c.generated.size());
    return std::min(request.max_tokens - n_generated, context_limit - n_prompt() - n_generated) - 1;
  }
  // The next sampled token certainly finishes the choice (max_tokens or the context end).
  bool terminal_next(const Choice& c, std::int32_t context_limit) const {
    const auto n_generated = std::int32_t(c.generated.size());
    return n_generated + 1 >= request.max_tokens || n_prompt() + n_generated + 1 >= context_limit;
  }
};

struct Scheduler::Candidate {
  Request* request = nullptr;
  Choice* choice = nullptr;  // null for an admission (the lead is chosen when admitted)
  bool waiting = false;
  int rank = 0;              // policy class, higher first
  double value = 0.0;        // terminal value, higher first within a class
  std::int64_t order = 0;    // admission or arrival order, lower first
};

}  // namespace flare::engine
