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

#include "engine/scheduler.h"
#include "engine/scheduler_state.h"

namespace flare::engine {

std::int32_t Scheduler::schedule_drafts(Request& r, Choice& c, std::int32_t room, std::vector<helios::PageCopy>& copies) {
  c.drafts.clear();
  if (!options_.speculates() || c.constraint || !r.all_forked) return 0;
  if (r.request.prompt_logprobs && !r.prompt_logprobs_sent) return 0;
  std::int32_t k = std::min({options_.max_draft_tokens, room, r.draft_room(c, options_.context_limit)});
  if (k <= 0) return 0;
  if (!c.history_drafts) c.history_drafts = std::make_unique<HistoryDrafts>(options_.history_draft_settings);
  c.history_drafts->propose(r.request.prompt_token_ids, c.generated, k, c.drafts);
  k = std::int32_t(c.drafts.size());
  if (k == 0) return 0;
  // Drafts take free pages only: a guess never evicts a checkpoint or preempts a request.
  if (!c.pages.append(k, copies)) {
    const std::int32_t page = options_.page_size_tokens;
    const std::int32_t last = c.pages.pages().empty() ? -1 : c.pages.pages().back();
    const std::int32_t tail_room = last >= 0 && pool_.ref_count(last) == 1
                                       ? std::int32_t(c.pages.pages().size()) * page - c.pages.n_tokens()
                                       : 0;
    k = std::min(k, pool_.n_free() * page + tail_room);
    if (k <= 0 || !c.pages.append(k, copies)) k = 0;
    c.drafts.resize(std::size_t(k));
  }
  return k;
}

void Scheduler::apply_verify_row(Request& r, Choice& c, std::span<const helios::SampledToken> sampled) {
  const auto k = std::int32_t(c.drafts.size());
  ++counters_.n_verify_rows;
  counters_.n_draft_tokens += k;
  // The pending token's KV is computed; each accepted draft's KV then is the KV of a known token.
  c.n_computed += 1;
  for (std::int32_t j = 0; j <= k; ++j) {
    const bool accepted = j < k && sampled[std::size_t(j)].token == c.drafts[std::size_t(j)];
    if (accepted) {
      ++c.n_computed;
      ++counters_.n_accepted_draft_tokens;
    }
    record_token(r, c, sampled[std::size_t(j)]);
    if (!accepted || !c.active()) break;
  }
  c.drafts.clear();
  if (c.active()) c.pages.truncate(c.n_computed);  // a finished choice has let its pages go already
}

}  // namespace flare::engine
