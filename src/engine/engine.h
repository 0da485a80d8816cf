// LocalEngine: the flare::engine::Engine of one device. One engine thread owns the StepRunner
// (backend, model, KV cache) and the Scheduler (pages, prefix cache); HTTP threads call submit(),
// cancel() and stats(), which only touch a mutex-protected inbox and a stats snapshot. Each step:
// schedule -> sampling plan -> page copies, forward and backend sampling (StepRunner) -> host
// sampling of the rows that need it and stop checks (Scheduler::apply) -> outputs to sinks ->
// retire finished requests, whose pages return to the pool at once. Sinks are called on the
// engine thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/engine_options.h"
#include "engine/request.h"
#include "engine/sampling_plan.h"
#include "engine/scheduler.h"
#include "helios/backend.h"
#include "helios/step.h"

namespace flare::engine {

// What the engine needs from a model: run one step over the KV cache. Called on the engine thread.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual std::int32_t vocab_size() const = 0;
  // Called once on the engine thread before its first step (a GPU runner binds its context).
  virtual void bind_thread() {}
  // KV pages backed by memory now. A runner whose KV cache is reserved and backed on demand grows
  // it in kv_grow (on the engine thread) and returns the pages backed then: fewer than wanted when
  // the device has no more memory. The defaults: every page backed from the start.
  virtual std::int32_t kv_backed_pages() const { return std::numeric_limits<std::int32_t>::max(); }
  virtual std::int32_t kv_grow(std::int32_t n_pages_wanted) { return n_pages_wanted; }
  // The same for each history group's pool (EngineOptions::kv_groups); group 0 is the above.
  virtual std::int32_t group_backed_pages(std::int32_t group) const {
    return group == 0 ? kv_backed_pages() : std::numeric_limits<std::int32_t>::max();
  }
  virtual std::int32_t group_grow(std::int32_t group, std::int32_t n_pages_wanted) {
    return group == 0 ? kv_grow(n_pages_wanted) : n_pages_wanted;
  }
  // Runs `copies` (copy-on-write of shared KV pages) and then the step, whose logits are those of
  // the rows' requested positions, [step.n_logit_rows(), vocab_size] f32. Of these, samples
  // plan.sampled_rows with plan.requests into out.sampled (the semantics of helios::sample_token,
  // so seeded draws match the host's) and copies plan.host_rows into out.host_logits; other rows
  // are never read. `out` is reused step to step, so its buffers keep their capacity.
  virtual void run(const helios::Step& step, std::span<const helios::PageCopy> copies, const SamplingPlan& plan,
                   StepResults& out) = 0;
  // Learned drafts (draft_plan.h): whether the runner has a draft model, and its proposals for a
  // step's plan (run before run() with the same copies, which the draft's KV cache needs too).
  virtual bool has_draft_model() const { return false; }
  virtual void propose_drafts(const DraftPlan& plan, std::span<const helios::PageCopy> copies,
                              std::vector<std::vector<std::int32_t>>& out);
};

class LocalEngine final : public Engine {
 public:
  // Validates the options (flare::Error, usage) and starts the engine thread.
  LocalEngine(const EngineOptions& options, std::unique_ptr<StepRunner> runner);
  // Stops the thread; requests still in flight receive a final `abort` output.
  ~LocalEngine() override;

  // Throws flare::Error (usage) for a malformed request (empty prompt, token ids outside the
  // vocabulary, sampling parameters out of range); capacity answers come back as `rejected`.
  SubmitResult submit(GenerationRequest request, std::shared_ptr<OutputSink> sink) override;
  void cancel(RequestHandle handle) override;
  void cancel_choice(RequestHandle handle, std::int32_t choice_index) override;
  EngineStats stats() const override;
  SchedulerCounters counters() const;

  // Blocks until no request is queued or running and stats() says so (tests, shutdown drains).
  void wait_idle();

 private:
  struct Submission {
    RequestHandle handle = 0;
    GenerationRequest request;
    helios::SamplingParams sampling;
    double submit_ms = 0.0;
  };
  struct Cancellation {
    RequestHandle handle = 0;
    std::int32_t choice_index = -1;  // -1: every choice
  };

  void loop();
  void drain_inbox(std::deque<Submission>& submissions, std::deque<Cancellation>& cancels);
  void deliver(std::vector<RequestOutputs> outputs);
  void run_step(StepPlan& plan);
  void publish_stats();
  double now_ms() const;

  const EngineOptions options_;
  std::unique_ptr<StepRunner> runner_;
  Scheduler scheduler_;  // engine thread only
  StepResults results_;  // engine thread only; reused by every step
  std::vector<std::vector<std::int32_t>> drafts_;  // engine thread only; the step's learned drafts
  std::unordered_map<RequestHandle, std::shared_ptr<OutputSink>> sinks_;  // engine thread only
  std::int64_t n_finished_unpublished_ = 0;                                 // engine thread only
  const std::chrono::steady_clock::time_point start_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<Submission> inbox_;
  std::deque<Cancellation> cancels_;
  std::unordered_map<RequestHandle, std::shared_ptr<OutputSink>> new_sinks_;
  std::int64_t n_in_flight_ = 0;  // submitted and not yet finished
  bool stopping_ = false;
  EngineStats stats_;
  SchedulerCounters counters_;
  std::atomic<RequestHandle> next_handle_{1};
  std::thread thread_;
};

}  // namespace flare::engine
