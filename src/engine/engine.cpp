// LocalEngine: the engine thread's loop, the inbox and the stats snapshot (see engine.h).
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "common/error.h"
#include "engine/admission.h"

namespace flare::engine {
namespace {

std::uint64_t request_seed(std::uint64_t engine_seed, RequestHandle handle) {
  std::uint64_t x = engine_seed ^ (handle * 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void StepRunner::propose_drafts(const DraftPlan&, std::span<const helios::PageCopy>, std::vector<std::vector<std::int32_t>>&) {
  fail(ExitCode::failure, "internal: learned drafts asked of a step runner without a draft model");
}

LocalEngine::LocalEngine(const EngineOptions& options, std::unique_ptr<StepRunner> runner)
    : options_(options), runner_(std::move(runner)), scheduler_(options), start_(std::chrono::steady_clock::now()) {
  if (!runner_) fail(ExitCode::failure, "internal: engine without a step runner");
  if (options_.learned_drafts && !runner_->has_draft_model()) {
    fail(ExitCode::failure, "internal: learned drafts enabled for a step runner without a draft model");
  }
  const std::int32_t n_backed = std::min(options.n_pages, runner_->kv_backed_pages());
  if (n_backed < options.n_pages) {
    // Pages get memory as the pool needs them; schedule() asks, on the engine thread.
    scheduler_.set_kv_backing(n_backed, [runner = runner_.get()](std::int32_t n) { return runner->kv_grow(n); });
  }
  publish_stats();
  thread_ = std::thread([this] { loop(); });
}

LocalEngine::~LocalEngine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // Everything still queued or running ends with an abort output.
  std::deque<Submission> submissions;
  std::deque<Cancellation> cancels;
  drain_inbox(submissions, cancels);
  for (auto& s : submissions) scheduler_.add(s.handle, std::move(s.request), std::move(s.sampling), s.submit_ms);
  std::vector<RequestHandle> handles;
  for (const auto& [handle, sink] : sinks_) handles.push_back(handle);
  for (RequestHandle handle : handles) deliver(scheduler_.cancel(handle));
  publish_stats();
}

double LocalEngine::now_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
}

Engine::SubmitResult LocalEngine::submit(GenerationRequest request, std::shared_ptr<OutputSink> sink) {
  if (!sink) fail(ExitCode::failure, "internal: request submitted without an output sink");
  admission_validate(request, runner_->vocab_size());
  std::lock_guard lock(mutex_);
  if (stopping_) {
    AdmissionError error{true, "a running engine", "an engine that is shutting down", "retry later"};
    return {0, error};
  }
  if (auto rejected = admission_check(options_, request, stats_.n_waiting + std::int64_t(inbox_.size()))) {
    return {0, rejected};
  }
  const RequestHandle handle = next_handle_++;
  helios::SamplingParams sampling = admission_sampling_params(request, request_seed(options_.seed, handle));
  inbox_.push_back(Submission{handle, std::move(request), std::move(sampling), now_ms()});
  new_sinks_.emplace(handle, std::move(sink));
  ++n_in_flight_;
  wake_.notify_one();
  return {handle, std::nullopt};
}

void LocalEngine::cancel(RequestHandle handle) {
  std::lock_guard lock(mutex_);
  cancels_.push_back(Cancellation{handle, -1});
  wake_.notify_one();
}

void LocalEngine::cancel_choice(RequestHandle handle, std::int32_t choice_index) {
  if (choice_index < 0) return;
  std::lock_guard lock(mutex_);
  cancels_.push_back(Cancellation{handle, choice_index});
  wake_.notify_one();
}

EngineStats LocalEngine::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

SchedulerCounters LocalEngine::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void LocalEngine::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return n_in_flight_ == 0; });
}

// Called with mutex_ held or after the thread stopped.
void LocalEngine::drain_inbox(std::deque<Submission>& submissions, std::deque<Cancellation>& cancels) {
  submissions.swap(inbox_);
  cancels.swap(cancels_);
  for (auto& [handle, sink] : new_sinks_) sinks_.emplace(handle, std::move(sink));
  new_sinks_.clear();
}

void LocalEngine::loop() {
  runner_->bind_thread();
  for (;;) {
    std::deque<Submission> submissions;
    std::deque<Cancellation> cancels;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !cancels_.empty() || scheduler_.has_work(); });
      if (stopping_) return;
      drain_inbox(submissions, cancels);
    }
    for (auto& s : submissions) scheduler_.add(s.handle, std::move(s.request), std::move(s.sampling), s.submit_ms);
    for (const auto& c : cancels) {
      deliver(c.choice_index < 0 ? scheduler_.cancel(c.handle) : scheduler_.cancel_choice(c.handle, c.choice_index));
    }
    StepPlan plan = scheduler_.schedule(now_ms());
    deliver(scheduler_.take_capacity_failures());
    if (!plan.empty()) run_step(plan);
    publish_stats();
    if (plan.empty() && scheduler_.has_work()) {  // nothing fits this instant: do not spin
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, std::chrono::milliseconds(1));
    }
  }
}

void LocalEngine::run_step(StepPlan& plan) {
  const std::int32_t vocab = runner_->vocab_size();
  std::vector<RequestOutputs> outputs;
  const auto started = std::chrono::steady_clock::now();
  try {
    if (!plan.draft.empty()) {
      runner_->propose_drafts(plan.draft, plan.page_copies, drafts_);
      scheduler_.fill_drafts(plan, drafts_);
    }
    const SamplingPlan sampling = scheduler_.plan_sampling(plan, vocab);
    runner_->run(plan.step, plan.page_copies, sampling, results_);
    outputs = scheduler_.apply(plan, sampling, results_, vocab);
    scheduler_.record_step_time(plan, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  } catch (const std::exception& e) {
    outputs = scheduler_.fail_all(std::string("the engine failed a step: ") + e.what());
  }
  deliver(std::move(outputs));
}

void LocalEngine::deliver(std::vector<RequestOutputs> outputs) {
  for (auto& request_outputs : outputs) {
    auto it = sinks_.find(request_outputs.handle);
    if (it == sinks_.end()) continue;
    bool finished = false;
    for (auto& output : request_outputs.outputs) {
      finished = finished || output.request_finished;
      try {
        it->second->on_output(std::move(output));
      } catch (const std::exception&) {
        // A sink that fails must not stop the engine; its request runs to its end regardless.
      }
    }
    if (finished) {
      sinks_.erase(it);
      ++n_finished_unpublished_;  // counted out of n_in_flight_ with the next stats
    }
  }
}

void LocalEngine::publish_stats() {
  std::lock_guard lock(mutex_);
  stats_.n_running = scheduler_.n_running();
  stats_.n_waiting = scheduler_.n_waiting();
  stats_.n_kv_pages_used = scheduler_.pool().n_used();
  stats_.n_kv_pages_free = scheduler_.pool().n_available();
  stats_.n_kv_pages_backed = scheduler_.pool().n_backed();
  stats_.n_prefix_queried_tokens = scheduler_.counters().n_prefix_queried_tokens;
  stats_.n_prefix_hit_tokens = scheduler_.counters().n_prefix_hit_tokens;
  stats_.n_verify_rows = scheduler_.counters().n_verify_rows;
  stats_.n_draft_tokens = scheduler_.counters().n_draft_tokens;
  stats_.n_accepted_draft_tokens = scheduler_.counters().n_accepted_draft_tokens;
  counters_ = scheduler_.counters();
  n_in_flight_ -= std::exchange(n_finished_unpublished_, 0);
  if (n_in_flight_ == 0) idle_.notify_all();
}

}  // namespace flare::engine
