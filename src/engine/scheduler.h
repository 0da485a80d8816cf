// The continuous-batching scheduler: pure logic, no threads, no device. As vLLM v1, there is no
// prefill or decode phase: every choice has known tokens (prompt + generated) and computed tokens
// (those with KV in the cache), and each step lets rows catch up under one token budget, so a step
// mixes prefill chunks, decode rows and the recomputation of preempted requests.
//
// A request with n choices prefills its prompt once (the lead, its first unfinished choice); when
// the prompt is computed the other choices fork the lead's pages (copy-on-write of the shared
// partial page) and all sample their first token from the same logits row.
//
// KV pages are allocated per step. When the pool runs dry the scheduler evicts prefix-cache
// checkpoints, then preempts the most recently admitted request not in this step (its pages return
// to the pool; it waits again, keeps its generated tokens and recomputes them when readmitted).
// Finished and cancelled choices free their pages at once, after their answer is checkpointed.
//
// schedule() builds the next step and plan_sampling() says which of its logits rows the backend
// samples and which the host reads (sampling_plan.h); the caller runs the page copies, the forward
// and the backend's sampling, then hands the results to apply(), which samples the host rows,
// checks stop conditions and returns the outputs per request. Owned by the engine thread; not
// thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/draft_plan.h"
#include "engine/engine_options.h"
#include "engine/prefix_cache.h"
#include "engine/request.h"
#include "engine/sampling_plan.h"
#include "engine/verify_policy.h"
#include "helios/history_pages.h"
#include "helios/page_pool.h"
#include "helios/sampling.h"
#include "helios/step.h"

namespace flare::engine {

// Which choice one row of a step belongs to, and what it computes.
struct ScheduledRow {
  RequestHandle handle = 0;
  std::int32_t choice_index = 0;
  std::int32_t n_tokens = 0;
  std::int32_t n_logits = 0;  // logits rows it produces (its last n_logits tokens)
  std::int32_t n_drafts = 0;  // a verify row: its pending token, then this many drafts (all with logits)
};

struct StepPlan {
  helios::Step step;
  std::vector<helios::PageCopy> page_copies;  // to run before the step (copy-on-write)
  std::vector<ScheduledRow> rows;             // [n_rows], parallel to step.rows
  // With a draft model: what it computes before the step; the runner's drafts go into the step
  // through Scheduler::fill_drafts.
  DraftPlan draft;
  bool empty() const { return rows.empty(); }
};

// A request's outputs from one apply() or cancel(), in order; the last of a finished request
// has request_finished set.
struct RequestOutputs {
  RequestHandle handle = 0;
  std::vector<StepOutput> outputs;
};

struct SchedulerCounters {
  std::int64_t n_steps = 0;
  std::int64_t n_preemptions = 0;
  std::int64_t n_prefix_queried_tokens = 0;
  std::int64_t n_prefix_hit_tokens = 0;
  std::int64_t n_scheduled_tokens = 0;
  // Speculative decoding: rows that verified drafts, the drafts they carried, and those accepted
  // (each verify row also emits one token of its own: accepted + rows tokens in all).
  std::int64_t n_verify_rows = 0;
  std::int64_t n_draft_tokens = 0;
  std::int64_t n_accepted_draft_tokens = 0;
};

// The generator seed of choice `choice_index` of a request seeded with `seed` (choice 0: seed).
std::uint64_t scheduler_choice_seed(std::uint64_t seed, std::int32_t choice_index);

class Scheduler {
 public:
  explicit Scheduler(const EngineOptions& options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues an admitted request (admission_check passed; sampling carries its resolved seed).
  void add(RequestHandle handle, GenerationRequest request, helios::SamplingParams sampling, double now_ms);
  // Retires every choice now; returns the final abort outputs (empty for an unknown handle).
  std::vector<RequestOutputs> cancel(RequestHandle handle);
  std::vector<RequestOutputs> cancel_choice(RequestHandle handle, std::int32_t choice_index);
  // Fails every request with an error output (the step that ran them failed).
  std::vector<RequestOutputs> fail_all(const std::string& message);

  // The KV pool starts with n_backed of its pages backed by memory and grows through `grow` (on
  // the engine thread, from schedule()). Call before the first request.
  void set_kv_backing(std::int32_t n_backed, helios::PagePool::GrowHook grow) { set_kv_backing(0, n_backed, std::move(grow)); }
  // The same for history group `group`'s pool.
  void set_kv_backing(std::int32_t group, std::int32_t n_backed, helios::PagePool::GrowHook grow);

  StepPlan schedule(double now_ms);
  // The requests schedule() retired because the KV pool cannot hold them even alone (the device had
  // no memory to back more pages): each ends with a capacity error. Deliver after each schedule().
  std::vector<RequestOutputs> take_capacity_failures() { return std::exchange(capacity_failures_, {}); }
  // The backend samples a row whose choice draws its next token freely from it: one logits row,
  // no token constraint, no prompt logprobs pending, not the prompt row n > 1 choices fork from.
  // Its request carries exactly what apply() would sample the row with (the choice's seed, its
  // tokens so far, output index = tokens generated), so the draw is the host's. Every other row
  // of an active choice goes to the host. Call right after schedule(); the plan's histories point
  // into this scheduler's requests until apply().
  SamplingPlan plan_sampling(const StepPlan& plan, std::int32_t vocab_size) const;
  // Puts the draft model's proposals (draft_proposal_run over plan.draft) into the plan's verify
  // rows. Call after schedule() and before plan_sampling() when plan.draft is not empty.
  void fill_drafts(StepPlan& plan, const std::vector<std::vector<TokenId>>& drafts);
  // How long the plan's step took (its drafts, forward and sampling): decode and verify steps
  // teach adaptive verification what draft tokens cost at this batch (verify_policy.h).
  void record_step_time(const StepPlan& plan, double ms);
  const VerifyPolicy& verify_policy() const { return verify_policy_; }
  // results: what the runner returned for plan_sampling(plan) (sampled tokens and host rows'
  // logits, [sampling.host_rows.size(), vocab_size] f32).
  std::vector<RequestOutputs> apply(const StepPlan& plan, const SamplingPlan& sampling, const StepResults& results,
                                    std::int32_t vocab_size);

  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  std::int64_t n_running() const { return std::int64_t(running_.size()); }
  std::int64_t n_waiting() const { return std::int64_t(waiting_.size()); }
  std::int32_t n_active_choices() const;
  const helios::PagePool& pool() const { return pools_.pool(0); }  // history group 0's
  const helios::HistoryPools& pools() const { return pools_; }
  const PrefixCache& prefix_cache() const { return *prefix_cache_; }
  PrefixCache& prefix_cache() { return *prefix_cache_; }
  const SchedulerCounters& counters() const { return counters_; }
  const EngineOptions& options() const { return options_; }

 private:
  struct Choice;
  struct Request;
  struct Candidate;

  Request* find(RequestHandle handle);
  const Request* find(RequestHandle handle) const;
  std::vector<Candidate> candidates(double now_ms);
  bool allocate(Request& request, Choice& choice, std::int32_t& n_tokens, std::vector<helios::PageCopy>& copies);
  void admit(Request& request);
  bool holds_pages_alone(const Request& request) const;  // no other request holds pages
  // Retires what schedule() found can never fit, into capacity_failures_.
  void retire_unfit();
  void preempt(Request& request);
  void fork_choices(Request& request, Choice& lead);
  void emit_row(StepPlan& plan, Request& request, Choice& choice, std::int32_t n_tokens);
  // The draft model's row for the target row just emitted (scheduler_drafts.cpp).
  void emit_draft_row(StepPlan& plan, Request& request, Choice& choice, std::int32_t n_tokens);
  // What of the choice's history may go into a prefix-cache checkpoint: with a draft model, only
  // positions whose draft KV is in the pages too.
  std::int32_t n_checkpointable(const Choice& choice) const;
  // Speculation (scheduler_drafts.cpp): fills choice.drafts for a decode row of at most `room`
  // more tokens and makes page room for them from free pages (never by evicting or preempting);
  // returns the number of drafts.
  std::int32_t schedule_drafts(Request& request, Choice& choice, std::int32_t room,
                               std::vector<helios::PageCopy>& copies);
  // Records what a verify row's tokens accept: the sampled token at each position while it equals
  // the draft there, then the first one that does not (or the token after the last draft); rolls
  // the computed count and pages back past the rejected drafts.
  void apply_verify_row(Request& request, Choice& choice, std::span<const helios::SampledToken> sampled);
  // What a choice's next token is sampled with (the min_tokens bans dropped outside the vocabulary).
  // n_generated: the tokens generated before the one drawn (more than the choice holds for the
  // positions of a verify row's drafts).
  helios::SamplingParams choice_sampling_params(const Request& request, const Choice& choice,
                                                std::int32_t vocab_size, std::int32_t n_generated) const;
  // Samples on the host from the choice's logits row, then records the token.
  void sample_choice(Request& request, Choice& choice, std::span<const float> logits);
  // Appends a sampled token to the choice, with its logprobs, and applies the stop conditions.
  void record_token(Request& request, Choice& choice, const helios::SampledToken& sampled);
  void add_prompt_logprobs(Request& request, std::int32_t first_position, std::int32_t n_logits,
                           std::span<const float> logits, std::int32_t vocab_size);
  void finish_choice(Request& request, Choice& choice, FinishReason reason, TokenId stop_token);
  void collect_outputs(Request& request, std::vector<RequestOutputs>& out);
  std::vector<RequestOutputs> retire(Request& request, FinishReason reason, const std::string& message);
  void remove(Request& request);

  EngineOptions options_;
  helios::HistoryPools pools_;
  std::unique_ptr<PrefixCache> prefix_cache_;
  std::list<std::unique_ptr<Request>> running_;  // in admission order
  std::list<std::unique_ptr<Request>> waiting_;  // in arrival order
  std::unordered_map<RequestHandle, Request*> by_handle_;  // every request in either list
  std::int64_t admission_counter_ = 0;
  std::int64_t arrival_counter_ = 0;
  std::int64_t schedule_stamp_ = 0;  // counts schedule() calls
  SchedulerCounters counters_;
  std::vector<RequestOutputs> capacity_failures_;
  VerifyPolicy verify_policy_;
};

}  // namespace flare::engine
