// Speculative decoding in the scheduler: which decode rows carry drafts, the pages for them, and
// what a verify row's draws accept (see scheduler.h). A verify row computes its pending token and
// k drafts in one step, with a logits row at each of the 1 + k positions; each position is drawn
// exactly as an ordinary decode step would draw it had the drafts before it been accepted (the
// same processed distribution, history and counter-based draw). Keeping the draws while they
// equal the drafts, plus the first that does not, therefore emits exactly the tokens ordinary
// decoding would: for greedy rows trivially, and for sampled rows draw for draw. That is
// rejection sampling of a deterministic draft (accept draft x with probability p(x), else draw
// from p without x), the form exact for history drafts and argmax-proposing draft models.
#include <algorithm>

#include "common/error.h"
#include "engine/scheduler.h"
#include "engine/scheduler_state.h"

namespace flare::engine {

std::int32_t Scheduler::schedule_drafts(Request& r, Choice& c, std::int32_t room, std::vector<helios::PageCopy>& copies) {
  c.drafts.clear();
  c.drafts_learned = false;
  if (!options_.speculates() || c.constraint || !r.all_forked) return 0;
  if (r.request.prompt_logprobs && !r.prompt_logprobs_sent) return 0;
  std::int32_t k = std::min({options_.max_draft_tokens, room, r.draft_room(c, options_.context_limit)});
  if (k > 0 && options_.adaptive_verification) k = verify_policy_.draft_count(c.acceptance, k, n_active_choices());
  if (k <= 0) return 0;
  if (options_.history_drafts) {
    if (!c.history_drafts) c.history_drafts = std::make_unique<HistoryDrafts>(options_.history_draft_settings);
    c.history_drafts->propose(r.request.prompt_token_ids, c.generated, k, c.drafts);
  }
  if (c.drafts.empty() && options_.learned_drafts) {
    c.drafts.assign(std::size_t(k), 0);  // placeholders until fill_drafts
    c.drafts_learned = true;
  }
  k = std::int32_t(c.drafts.size());
  if (k == 0) return 0;
  // Drafts take free pages only: a guess never evicts a checkpoint or preempts a request.
  if (c.pages.append(k, copies) >= 0) {
    // As many as every history group's free pages hold.
    const std::int32_t page = options_.page_size_tokens;
    for (std::int32_t g = 0; g < pools_.n_groups(); ++g) {
      const helios::SequencePages& pages = c.pages.group(g);
      const std::int32_t last = pages.pages().empty() ? -1 : pages.pages().back();
      const std::int32_t tail_room = last >= 0 && pools_.pool(g).ref_count(last) == 1
                                         ? std::int32_t(pages.pages().size()) * page - pages.n_tokens()
                                         : 0;
      k = std::min(k, pools_.pool(g).n_free() * page + tail_room);
    }
    if (k <= 0 || c.pages.append(k, copies) >= 0) k = 0;
    c.drafts.resize(std::size_t(k));
    if (k == 0) c.drafts_learned = false;
  }
  return k;
}

void Scheduler::emit_draft_row(StepPlan& plan, Request& r, Choice& c, std::int32_t n_tokens) {
  // The target row starts at n_computed (= the row's start); the draft resumes where it stopped.
  const std::int32_t start = std::min(c.n_draft_computed, c.n_computed);
  const std::int32_t target_end = c.n_computed + n_tokens;
  // A row the draft drafts for ends at the pending token (its logits give the first draft); the
  // draft's own further forwards then write up to the last draft's position.
  const std::int32_t end = c.drafts_learned ? c.n_computed + 1 : target_end;
  c.draft_end = c.drafts_learned ? c.n_computed + std::int32_t(c.drafts.size()) : target_end;
  helios::StepRow row;
  row.n_tokens = end - start;
  row.start_position = start;
  row.n_logits = c.drafts_learned ? 1 : 0;
  row.first_block = std::int32_t(plan.draft.step.block_tables.size());
  row.n_blocks = std::int32_t(c.pages.pages().size());
  const std::int32_t known = r.known(c);
  for (std::int32_t p = start; p < end; ++p) {
    plan.draft.step.tokens.push_back(p < known ? r.token_at(c, p) : c.drafts[std::size_t(p - known)]);
  }
  plan.draft.step.block_tables.insert(plan.draft.step.block_tables.end(), c.pages.pages().begin(), c.pages.pages().end());
  plan.draft.step.rows.push_back(row);
  if (c.drafts_learned) {
    plan.draft.target_rows.push_back(std::int32_t(plan.rows.size()) - 1);
    plan.draft.n_drafts.push_back(std::int32_t(c.drafts.size()));
  }
}

void Scheduler::fill_drafts(StepPlan& plan, const std::vector<std::vector<TokenId>>& drafts) {
  if (drafts.size() != plan.draft.target_rows.size()) {
    fail(ExitCode::failure, "internal: {} draft lists for {} drafting rows", drafts.size(), plan.draft.target_rows.size());
  }
  std::vector<std::int32_t> token_offset(plan.rows.size() + 1, 0);
  for (std::size_t i = 0; i < plan.rows.size(); ++i) token_offset[i + 1] = token_offset[i] + plan.rows[i].n_tokens;
  for (std::size_t i = 0; i < drafts.size(); ++i) {
    const auto target = std::size_t(plan.draft.target_rows[i]);
    const ScheduledRow& row = plan.rows[target];
    if (std::int32_t(drafts[i].size()) != row.n_drafts || row.n_drafts != plan.draft.n_drafts[i]) {
      fail(ExitCode::failure, "internal: {} drafts for a verify row of {}", drafts[i].size(), row.n_drafts);
    }
    Request* r = find(row.handle);  // fill_drafts runs right after schedule(): the row's request is there
    if (r == nullptr) fail(ExitCode::failure, "internal: drafts for a request that left the scheduler");
    Choice& c = r->choices[std::size_t(row.choice_index)];
    c.drafts = drafts[i];
    std::copy(drafts[i].begin(), drafts[i].end(), plan.step.tokens.begin() + token_offset[target] + 1);
  }
}

std::int32_t Scheduler::n_checkpointable(const Choice& c) const {
  return options_.learned_drafts ? std::min(c.n_computed, c.n_draft_computed) : c.n_computed;
}

void Scheduler::apply_verify_row(Request& r, Choice& c, std::span<const helios::SampledToken> sampled) {
  const auto k = std::int32_t(c.drafts.size());
  ++counters_.n_verify_rows;
  counters_.n_draft_tokens += k;
  // The pending token's KV is computed; each accepted draft's KV then is the KV of a known token.
  c.n_computed += 1;
  std::int32_t n_accepted = 0;
  if (options_.learned_drafts) c.n_draft_computed = c.draft_end;  // clamped to n_computed by apply()
  for (std::int32_t j = 0; j <= k; ++j) {
    const bool accepted = j < k && sampled[std::size_t(j)].token == c.drafts[std::size_t(j)];
    if (accepted) {
      ++c.n_computed;
      ++n_accepted;
    }
    record_token(r, c, sampled[std::size_t(j)]);
    if (!accepted || !c.active()) break;
  }
  counters_.n_accepted_draft_tokens += n_accepted;
  c.acceptance.record(k, n_accepted);
  c.drafts.clear();
  c.drafts_learned = false;
  c.n_draft_computed = std::min(c.n_draft_computed, c.n_computed);
  if (c.active()) c.pages.truncate(c.n_computed);  // a finished choice has let its pages go already
}

void Scheduler::record_step_time(const StepPlan& plan, double ms) {
  // Only steps of decode and verify rows: a prefill chunk's time says nothing about draft tokens.
  for (const ScheduledRow& row : plan.rows) {
    if (row.n_drafts == 0 && row.n_tokens > 1) return;
  }
  std::int32_t widest = 1;
  for (const ScheduledRow& row : plan.rows) widest = std::max(widest, row.n_tokens);
  verify_policy_.record_step(plan.step.n_rows(), widest, ms);
}

}  // namespace flare::engine
