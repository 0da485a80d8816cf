// The scheduler test harness: small engine options, request builders, and Harness, which drives a
// Scheduler with the fake model step by step, checks each step's invariants and records outputs.
#pragma once

#include <algorithm>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "engine/scheduler.h"
#include "fake_model.h"

namespace flare::engine::testing {

inline constexpr std::int32_t kVocab = 64;

inline EngineOptions small_options() {
  EngineOptions o;
  o.max_concurrency = 4;
  o.prefill_chunk_tokens = 16;
  o.page_size_tokens = 4;
  o.n_pages = 128;
  o.context_limit = 256;
  o.eos_token_ids = {};
  return o;
}

inline GenerationRequest make_request(std::vector<TokenId> prompt, std::int32_t max_tokens, float temperature = 0.0f) {
  GenerationRequest r;
  r.prompt_token_ids = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = temperature;
  return r;
}

inline std::vector<TokenId> iota_prompt(std::int32_t n, std::int32_t start = 1) {
  std::vector<TokenId> p;
  for (std::int32_t i = 0; i < n; ++i) p.push_back((start + i * 7) % kVocab);
  return p;
}

inline helios::SamplingParams params_of(const GenerationRequest& r, std::uint64_t seed) {
  helios::SamplingParams p;
  p.temperature = r.sampling.temperature;
  p.top_k = r.sampling.top_k;
  p.top_p = r.sampling.top_p;
  p.seed = r.sampling.seed.value_or(seed);
  p.n_top_logprobs = r.logprobs ? r.top_logprobs : 0;
  return p;
}

// Drives a scheduler with the fake model, checking step invariants, and records outputs.
struct Harness {
  explicit Harness(EngineOptions o) : options(o), scheduler(o), model(o.n_pages, o.page_size_tokens, kVocab) {
    if (o.learned_drafts) draft = std::make_unique<FakeModel>(o.n_pages, o.page_size_tokens, kVocab);
  }

  RequestHandle add(const GenerationRequest& r, std::uint64_t seed = 7) {
    const RequestHandle h = next++;
    requests[h] = r;
    scheduler.add(h, r, params_of(r, seed), now_ms);
    return h;
  }

  void record(std::vector<RequestOutputs> outs) {
    for (auto& ro : outs) {
      ASSERT_EQ(finished.count(ro.handle), 0u) << "output after request_finished";
      for (std::size_t i = 0; i < ro.outputs.size(); ++i) {
        auto& o = ro.outputs[i];
        EXPECT_EQ(o.request_finished, i + 1 == ro.outputs.size() && o.request_finished);
        for (auto& t : o.tokens) tokens[ro.handle][o.choice_index].push_back(t.token_id);
        if (o.finish_reason != FinishReason::none) finish[ro.handle][o.choice_index] = o.finish_reason;
        if (o.request_finished) finished.insert(ro.handle);
        last_usage[ro.handle] = o.usage;
        all[ro.handle].push_back(o);
      }
    }
  }

  double step_ms = 1.0;  // a decode step's simulated time

  // One step; returns false when there was nothing to run.
  bool step() {
    StepPlan plan = scheduler.schedule(now_ms);
    now_ms += 1.0;
    if (plan.empty()) return false;
    helios::step_validate(plan.step, options.n_pages, options.page_size_tokens);
    EXPECT_LE(plan.step.n_tokens(), options.step_token_budget());
    EXPECT_LE(plan.step.n_rows(), options.max_concurrency);
    EXPECT_LE(scheduler.n_active_choices(), options.max_concurrency);
    for (const auto& row : plan.step.rows) EXPECT_LE(row.n_tokens, options.prefill_chunk_tokens);
    for (const auto& row : plan.rows) {
      if (row.n_drafts > 0) ++n_verify_rows;
    }
    if (!plan.draft.empty()) {
      EXPECT_TRUE(draft) << "a draft plan without a draft model";
      if (!draft) return false;
      helios::step_validate(plan.draft.step, options.n_pages, options.page_size_tokens);
      std::vector<std::vector<TokenId>> drafts;
      bool first = true;  // the step's page copies run before the draft's first forward
      draft_proposal_run(plan.draft, [&](const helios::Step& s) {
        helios::step_validate(s, options.n_pages, options.page_size_tokens);
        const auto copies = first ? std::span<const helios::PageCopy>(plan.page_copies) : std::span<const helios::PageCopy>();
        first = false;
        return draft->greedy(s, copies);
      }, drafts);
      scheduler.fill_drafts(plan, drafts);
    }
    plans.push_back(plan);
    const SamplingPlan sampling = scheduler.plan_sampling(plan, kVocab);
    StepResults results;
    model.run(plan.step, plan.page_copies, sampling, results);
    record(scheduler.apply(plan, sampling, results, kVocab));
    // Step times as the engine reports them, from a memory-bound device's cost model: a draft
    // token costs a twentieth of a decode step (adaptive verification decides from these).
    std::int32_t widest = 1;
    for (const auto& row : plan.rows) widest = std::max(widest, row.n_tokens);
    scheduler.record_step_time(plan, step_ms * (1.0 + 0.05 * double(widest - 1)));
    return true;
  }

  void run_all(int max_steps = 100000) {
    for (int i = 0; i < max_steps && scheduler.has_work(); ++i) {
      if (!step()) FAIL() << "scheduler has work but scheduled nothing";
    }
    EXPECT_FALSE(scheduler.has_work());
  }

  // Every page still used belongs to the prefix cache; clearing it empties the pool.
  void expect_pages_returned() {
    EXPECT_EQ(scheduler.pool().n_used(), scheduler.prefix_cache().n_pages_exclusive());
    scheduler.prefix_cache().clear();
    EXPECT_EQ(scheduler.pool().n_used(), 0);
  }

  EngineOptions options;
  Scheduler scheduler;
  FakeModel model;
  std::unique_ptr<FakeModel> draft;  // with options.learned_drafts; its KV must follow every sequence
  double now_ms = 0.0;
  RequestHandle next = 1;
  std::vector<StepPlan> plans;
  std::map<RequestHandle, GenerationRequest> requests;
  std::map<RequestHandle, std::map<std::int32_t, std::vector<TokenId>>> tokens;
  std::map<RequestHandle, std::map<std::int32_t, FinishReason>> finish;
  std::map<RequestHandle, Usage> last_usage;
  std::map<RequestHandle, std::vector<StepOutput>> all;
  std::set<RequestHandle> finished;
  std::int64_t n_verify_rows = 0;
};

}  // namespace flare::engine::testing
