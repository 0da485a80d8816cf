// Continuous batching: candidates, ordering, page allocation, preemption and the step plan
// (see scheduler.h). Sampling and outputs are in scheduler_apply.cpp.
#include "engine/scheduler.h"

#include <algorithm>

#include "common/error.h"
#include "common/sizes.h"
#include "engine/admission.h"
#include "engine/scheduler_state.h"

namespace flare::engine {

namespace {

const EngineOptions& validated(const EngineOptions& options) {
  engine_options_validate(options);
  return options;
}

helios::HistoryPools history_pools(const EngineOptions& options) {
  std::vector<helios::HistoryPools::Group> groups;
  for (const auto& group : options.history_groups()) groups.push_back({group.n_pages, group.window_tokens});
  helios::HistoryPools pools(groups);
  // A draft model keeps its KV in group 0's pages and attends to all of them.
  if (options.learned_drafts) pools.keep_full_history(0);
  return pools;
}

}  // namespace

Scheduler::Scheduler(const EngineOptions& options) : options_(validated(options)), pools_(history_pools(options)) {
  prefix_cache_ = std::make_unique<PrefixCache>(pools_, options.page_size_tokens,
                                                options.max_concurrency * options.prefix_checkpoints_per_slot,
                                                options.max_concurrency * options.prefix_snapshots_per_slot);
  for (const MeasuredStepCost& cost : options.measured_step_costs)
    verify_policy_.record_step(cost.rows, cost.tokens_per_row, cost.milliseconds);
}

Scheduler::~Scheduler() {
  running_.clear();  // sequences release their pages before the pool goes away
  waiting_.clear();
  prefix_cache_.reset();
}

void Scheduler::set_kv_backing(std::int32_t group, std::int32_t n_backed, helios::PagePool::GrowHook grow) {
  pools_.pool(group).set_backing(n_backed, std::move(grow));
}

void Scheduler::add(RequestHandle handle, GenerationRequest request, helios::SamplingParams sampling, double now_ms) {
  auto r = std::make_unique<Request>();
  r->handle = handle;
  r->sampling = std::move(sampling);
  r->arrival = ++arrival_counter_;
  r->arrival_ms = now_ms;
  const std::int32_t n = std::max(request.n, 1);
  r->request = std::move(request);
  r->choices.reserve(std::size_t(n));
  for (std::int32_t i = 0; i < n; ++i) {
    r->choices.emplace_back(pools_, options_.page_size_tokens, i);
    if (r->request.constraint) r->choices.back().constraint = r->request.constraint->clone();
  }
  if (!by_handle_.emplace(handle, r.get()).second) fail(ExitCode::failure, "internal: request handle {} reused", handle);
  waiting_.push_back(std::move(r));
}

Scheduler::Request* Scheduler::find(RequestHandle handle) {
  auto it = by_handle_.find(handle);
  return it == by_handle_.end() ? nullptr : it->second;
}

const Scheduler::Request* Scheduler::find(RequestHandle handle) const {
  auto it = by_handle_.find(handle);
  return it == by_handle_.end() ? nullptr : it->second;
}

std::int32_t Scheduler::n_active_choices() const {
  std::int32_t n = 0;
  for (const auto& r : running_) n += r->n_active();
  return n;
}

void Scheduler::remove(Request& request) {
  by_handle_.erase(request.handle);
  for (auto* list : {&running_, &waiting_}) {
    auto it = std::find_if(list->begin(), list->end(), [&](const auto& r) { return r.get() == &request; });
    if (it != list->end()) {
      list->erase(it);
      return;
    }
  }
}

std::vector<Scheduler::Candidate> Scheduler::candidates(double now_ms) {
  const bool throughput = options_.scheduler_policy == SchedulerPolicy::throughput;
  std::vector<Candidate> out;
  for (auto& r : running_) {
    for (auto& c : r->choices) {
      if (!c.active() || !c.forked) continue;
      const std::int32_t pending = r->target(c) - c.n_computed;
      if (pending <= 0) continue;
      Candidate cand{r.get(), &c, false, 0, 0.0, r->admission * 1024 + c.index};
      const bool decode = pending == 1 && c.n_computed >= r->n_prompt();
      double value = 0.0;
      if (decode && r->terminal_next(c, options_.context_limit)) {
        if (c.terminal_since_ms < 0) c.terminal_since_ms = now_ms;
        const double age_ms = now_ms - c.terminal_since_ms;
        value = options_.terminal_value + options_.terminal_age_price * age_ms * age_ms;
      }
      cand.value = value;
      if (throughput) {
        cand.rank = c.n_skipped_steps > 0 || value > 0 ? 4 : decode ? 1 : 3;
      } else {
        cand.rank = decode ? 3 : 2;
      }
      out.push_back(cand);
    }
  }
  // Admissions in arrival order while concurrency slots remain; the head blocks the rest (FIFO).
  std::int32_t room = options_.max_concurrency - n_active_choices();
  for (auto& r : waiting_) {
    if (r->n_active() > room) break;
    room -= r->n_active();
    out.push_back(Candidate{r.get(), nullptr, true, throughput ? 2 : 1, 0.0, r->arrival * 1024});
  }
  std::stable_sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.rank != b.rank) return a.rank > b.rank;
    if (a.value != b.value) return a.value > b.value;
    return a.order < b.order;
  });
  return out;
}

void Scheduler::admit(Request& r) {
  Choice& lead = *r.lead();
  // A lone choice may reuse its whole known history (answer checkpoints); choices that fork
  // share only the prompt. Prompt logprobs need every prompt position computed.
  std::vector<TokenId> tokens = r.request.prompt_token_ids;
  r.all_forked = r.n_active() == 1;
  if (r.all_forked) tokens.insert(tokens.end(), lead.generated.begin(), lead.generated.end());
  const bool may_reuse = !r.request.prompt_logprobs || r.prompt_logprobs_sent;
  lead.pages = may_reuse ? prefix_cache_->lookup(tokens, std::int32_t(tokens.size()) - 1)
                         : helios::HistoryPages(pools_, options_.page_size_tokens);
  lead.n_computed = lead.pages.n_tokens();
  lead.n_draft_computed = lead.n_computed;  // checkpoints hold draft KV too (n_checkpointable)
  lead.forked = true;
  r.running = true;
  r.admission = ++admission_counter_;
  auto it = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& p) { return p.get() == &r; });
  running_.push_back(std::move(*it));
  waiting_.erase(it);
}

void Scheduler::preempt(Request& r) {
  for (auto& c : r.choices) {
    c.pages.free();
    c.n_computed = 0;
    c.n_draft_computed = 0;
    c.forked = false;
    c.n_skipped_steps = 0;
  }
  r.all_forked = false;
  r.running = false;
  if (!r.prompt_logprobs_sent) r.prompt_logprobs.clear();
  auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& p) { return p.get() == &r; });
  auto owned = std::move(*it);
  running_.erase(it);
  auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& p) { return p->arrival > r.arrival; });
  waiting_.insert(pos, std::move(owned));
}

bool Scheduler::allocate(Request& r, Choice& c, std::int32_t& n_tokens, std::vector<helios::PageCopy>& copies) {
  const std::int32_t page = options_.page_size_tokens;
  for (;;) {
    const std::int32_t short_group = c.pages.append(n_tokens, copies);
    if (short_group < 0) return true;
    helios::PagePool& pool = pools_.pool(short_group);
    const helios::SequencePages& pages = c.pages.group(short_group);
    // A checkpoint's snapshot of this choice's partly filled last page would make the choice copy
    // that page; with no page free, the snapshot is dropped instead (spec 3.3: snapshots are
    // skipped where nothing is free).
    auto shared_tail = [&] {
      return pages.n_tokens() % page != 0 && pages.pages().back() != helios::SequencePages::k_released &&
             pool.ref_count(pages.pages().back()) > 1;
    };
    if (shared_tail() && prefix_cache_->release_snapshots_of(short_group, pages.pages().back())) continue;
    if (prefix_cache_->evict_until_free(pages.pages_to_append(n_tokens), short_group)) continue;
    // A prefill chunk shrinks to what the free pages hold before anyone is preempted.
    const std::int32_t have = pages.n_tokens();
    const auto n_pages_now = std::int32_t(pages.pages().size());
    std::int32_t n_fit = pool.n_free() * page;
    if (shared_tail()) n_fit -= have % page;
    else n_fit += n_pages_now * page - have;
    if (n_fit >= 1 && n_fit < n_tokens) {
      n_tokens = n_fit;
      continue;
    }
    Request* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      Request* candidate = it->get();
      if (candidate == &r || candidate->scheduled_stamp == schedule_stamp_) continue;  // not one in this step
      if (candidate->n_pages_held() == 0) continue;
      victim = candidate;
      break;
    }
    if (victim == nullptr) {
      // With nothing else holding pages, no later step frees any: all the pool could back is not
      // enough for this request (unless its own other choices are still making progress).
      if (holds_pages_alone(r) && !pool.can_grow()) r.unfit_stamp = schedule_stamp_;
      return false;
    }
    preempt(*victim);
    ++counters_.n_preemptions;
  }
}

void Scheduler::emit_row(StepPlan& plan, Request& r, Choice& c, std::int32_t n_tokens) {
  const std::int32_t start = c.n_computed;
  const auto n_drafts = std::int32_t(c.drafts.size());
  const bool wants_prompt_logprobs = r.request.prompt_logprobs && !r.prompt_logprobs_sent && start < r.n_prompt();
  const bool samples = start + n_tokens == r.known(c) + n_drafts;
  helios::StepRow row;
  row.n_tokens = n_tokens;
  row.start_position = start;
  row.n_logits = n_drafts > 0 ? n_tokens : wants_prompt_logprobs ? n_tokens : samples ? 1 : 0;
  row.first_block = std::int32_t(plan.step.block_tables.size());
  row.n_blocks = std::int32_t(c.pages.pages().size());
  c.pages.append_table(0, plan.step.block_tables);
  for (std::int32_t g = 1; g < c.pages.n_groups(); ++g) {
    c.pages.append_table(g, plan.step.group_block_tables[std::size_t(g - 1)]);
  }
  const std::int32_t known = r.known(c);
  for (std::int32_t p = start; p < start + n_tokens; ++p) {
    plan.step.tokens.push_back(p < known ? r.token_at(c, p) : c.drafts[std::size_t(p - known)]);
  }
  plan.step.rows.push_back(row);
  plan.rows.push_back(ScheduledRow{r.handle, c.index, n_tokens, row.n_logits, n_drafts});
}

StepPlan Scheduler::schedule(double now_ms) {
  StepPlan plan;
  plan.step.group_block_tables.resize(std::size_t(pools_.n_groups() - 1));
  std::int32_t budget = options_.step_token_budget();
  std::int32_t verify_budget = options_.speculative_token_capacity;  // tokens of this step's verify rows
  ++schedule_stamp_;
  if (options_.speculates() && options_.adaptive_verification) verify_policy_.begin_step(n_active_choices());
  bool admissions_blocked = false;
  // Sliding-window groups first give back what no query from here on reads: between steps every
  // sequence holds about a window there, whatever its last step computed.
  for (auto& r : running_) {
    for (auto& c : r->choices) {
      if (c.active() && c.forked) c.pages.release_behind(c.n_computed);
    }
  }
  auto cands = candidates(now_ms);
  for (const Candidate& cand : cands) {
    Request& r = *cand.request;
    if (cand.waiting == r.running) continue;  // preempted earlier in this loop
    if (budget == 0) break;
    if (cand.waiting) {
      if (admissions_blocked || n_active_choices() + r.n_active() > options_.max_concurrency) continue;
      if (!pools_.pool(0).can_grow() && admission_worst_case_pages(options_, r.request) > pools_.pool(0).n_backed()) {
        r.unfit_stamp = schedule_stamp_;  // admission counted on pages the device could not back
        continue;
      }
      admit(r);
    }
    Choice& c = cand.waiting ? *r.lead() : *cand.choice;
    c.drafts.clear();
    c.drafts_learned = false;
    std::int32_t n = std::min({r.target(c) - c.n_computed, budget, options_.prefill_chunk_tokens});
    if (n <= 0) continue;
    const bool decode = n == 1 && c.n_computed + 1 == r.known(c) && c.n_computed >= r.n_prompt();
    // Sliding-window groups give back what no query from here on reads before asking for pages.
    c.pages.release_behind(c.n_computed);
    if (!allocate(r, c, n, plan.page_copies)) {
      if (cand.waiting) {
        preempt(r);  // back to the queue, in arrival order; later arrivals wait behind it
        admissions_blocked = true;
      }
      continue;
    }
    if (cand.waiting && r.n_cached_prompt_tokens < 0) {  // usage reports the first admission's hit
      r.n_cached_prompt_tokens = std::min(c.n_computed, r.n_prompt());
      counters_.n_prefix_queried_tokens += r.n_prompt();
      counters_.n_prefix_hit_tokens += r.n_cached_prompt_tokens;
    }
    if (decode) {
      const std::int32_t room = std::min({budget, options_.prefill_chunk_tokens, verify_budget}) - n;
      if (const std::int32_t k = schedule_drafts(r, c, room, plan.page_copies); k > 0) {
        n += k;
        verify_budget -= n;
      }
    }
    emit_row(plan, r, c, n);
    if (options_.learned_drafts) emit_draft_row(plan, r, c, n);
    budget -= n;
    r.scheduled_stamp = schedule_stamp_;
    c.scheduled_stamp = schedule_stamp_;
  }
  for (auto& r : running_) {
    for (auto& c : r->choices) c.n_skipped_steps = 0;
  }
  for (const Candidate& cand : cands) {
    if (cand.choice == nullptr || !cand.request->running) continue;
    if (cand.choice->scheduled_stamp != schedule_stamp_) ++cand.choice->n_skipped_steps;
  }
  retire_unfit();
  if (!plan.empty()) {
    ++counters_.n_steps;
    counters_.n_scheduled_tokens += plan.step.n_tokens();
  }
  return plan;
}

bool Scheduler::holds_pages_alone(const Request& r) const {
  return std::none_of(running_.begin(), running_.end(),
                      [&](const auto& other) { return other.get() != &r && other->n_pages_held() > 0; });
}

void Scheduler::retire_unfit() {
  std::vector<Request*> unfit;
  for (auto* list : {&running_, &waiting_}) {
    for (auto& r : *list) {
      if (r->unfit_stamp == schedule_stamp_ && r->scheduled_stamp != schedule_stamp_) unfit.push_back(r.get());
    }
  }
  const std::int64_t page = options_.page_size_tokens;
  for (Request* r : unfit) {
    const std::int64_t n_needed = admission_worst_case_pages(options_, r->request);
    const helios::PagePool& pool = pools_.pool(0);
    const std::int64_t n_backed = pool.n_backed();
    AdmissionError error;
    error.needed = format_count(std::uint64_t(n_needed * page)) + " tokens of KV cache (" +
                   format_count(std::uint64_t(n_needed)) + " pages) for this request alone";
    error.available = format_count(std::uint64_t(n_backed * page)) + " tokens of KV cache (" +
                      format_count(std::uint64_t(n_backed)) + " pages)";
    if (n_backed < pool.n_pages()) {
      error.available += " backed by device memory, of " + format_count(std::uint64_t(pool.n_pages())) +
                         " reserved pages: the device had no memory for more";
    }
    error.options = options_.kv_capacity_options + ", a smaller max_tokens or n";
    r->error_is_capacity = true;
    for (auto& outputs : retire(*r, FinishReason::error, error.message())) capacity_failures_.push_back(std::move(outputs));
  }
}

}  // namespace flare::engine
