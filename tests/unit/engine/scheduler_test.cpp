// Scheduler tests against the fake model: token budget, chunked prefill, mixed steps, admission
// limits and queueing, stop conditions, n > 1 forks, prefix-cache reuse, preemption, policies,
// and pages returned after every request.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>

#include "fake_model.h"
#include "scheduler_harness.h"

namespace flare::engine {
namespace {

using testing::FakeModel;
using testing::Harness;
using testing::iota_prompt;
using testing::kVocab;
using testing::make_request;
using testing::params_of;
using testing::reference_tokens;
using testing::small_options;

TEST(Scheduler, GreedyRequestMatchesReferenceAndReturnsPages) {
  Harness h(small_options());
  auto r = make_request(iota_prompt(10), 12);
  const auto handle = h.add(r);
  h.run_all();
  EXPECT_EQ(h.tokens[handle][0], reference_tokens(h.model, r.prompt_token_ids, params_of(r, 7), 0, 12));
  EXPECT_EQ(h.finish[handle][0], FinishReason::length);
  EXPECT_EQ(h.last_usage[handle].n_prompt_tokens, 10);
  EXPECT_EQ(h.last_usage[handle].n_generated_tokens, 12);
  EXPECT_EQ(h.last_usage[handle].n_cached_prompt_tokens, 0);
  h.expect_pages_returned();
}

TEST(Scheduler, ChunkedPrefillThenDecode) {
  Harness h(small_options());
  auto r = make_request(iota_prompt(40), 3);
  h.add(r);
  h.run_all();
  // 40 prompt tokens in chunks of 16, 16, 8 (logits only on the last), then 2 decode steps.
  ASSERT_EQ(h.plans.size(), 5u);
  EXPECT_EQ(h.plans[0].step.rows[0].n_tokens, 16);
  EXPECT_EQ(h.plans[0].step.rows[0].n_logits, 0);
  EXPECT_EQ(h.plans[1].step.rows[0].start_position, 16);
  EXPECT_EQ(h.plans[2].step.rows[0].n_tokens, 8);
  EXPECT_EQ(h.plans[2].step.rows[0].n_logits, 1);
  EXPECT_EQ(h.plans[3].step.rows[0].n_tokens, 1);
  EXPECT_EQ(h.plans[3].step.rows[0].start_position, 40);
}

TEST(Scheduler, DecodeRowsAndPrefillChunksShareAStep) {
  Harness h(small_options());
  const auto a = h.add(make_request(iota_prompt(5), 20));
  h.step();  // a's prompt
  const auto b = h.add(make_request(iota_prompt(60, 3), 2));
  h.step();
  const auto& step = h.plans.back();
  ASSERT_EQ(step.rows.size(), 2u);
  EXPECT_EQ(step.rows[0].handle, a);  // balanced: the decode row first
  EXPECT_EQ(step.rows[0].n_tokens, 1);
  EXPECT_EQ(step.rows[1].handle, b);
  EXPECT_EQ(step.rows[1].n_tokens, 15);  // the rest of the 16-token budget
  h.run_all();
  EXPECT_EQ(h.tokens[a][0], reference_tokens(h.model, iota_prompt(5), params_of(h.requests[a], 7), 0, 20));
  EXPECT_EQ(h.tokens[b][0], reference_tokens(h.model, iota_prompt(60, 3), params_of(h.requests[b], 7), 0, 2));
  h.expect_pages_returned();
}

TEST(Scheduler, ThroughputPolicyPrefillsFirstButNoRowWaitsTwice) {
  auto o = small_options();
  o.scheduler_policy = SchedulerPolicy::throughput;
  o.terminal_value = 0;
  o.terminal_age_price = 0;
  Harness h(o);
  const auto a = h.add(make_request(iota_prompt(5), 20));
  h.step();
  const auto b = h.add(make_request(iota_prompt(60, 3), 2));
  h.step();
  ASSERT_EQ(h.plans.back().rows.size(), 1u);
  EXPECT_EQ(h.plans.back().rows[0].handle, b);
  EXPECT_EQ(h.plans.back().rows[0].n_tokens, 16);
  h.step();  // a was skipped: it goes first now
  ASSERT_EQ(h.plans.back().rows.size(), 2u);
  EXPECT_EQ(h.plans.back().rows[0].handle, a);
  h.run_all();
  EXPECT_EQ(h.tokens[a][0], reference_tokens(h.model, iota_prompt(5), params_of(h.requests[a], 7), 0, 20));
}

TEST(Scheduler, ThroughputPolicyRetiresTerminalRowsFirst) {
  auto o = small_options();
  o.scheduler_policy = SchedulerPolicy::throughput;
  Harness h(o);
  const auto a = h.add(make_request(iota_prompt(5), 2));
  h.step();  // prompt; a's next token is its last: terminal
  h.add(make_request(iota_prompt(60, 3), 2));
  h.step();
  ASSERT_GE(h.plans.back().rows.size(), 1u);
  EXPECT_EQ(h.plans.back().rows[0].handle, a);
  EXPECT_TRUE(h.finished.count(a));
}

TEST(Scheduler, AdmissionBoundedByConcurrencyFifo) {
  auto o = small_options();
  o.max_concurrency = 2;
  Harness h(o);
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 5; ++i) handles.push_back(h.add(make_request(iota_prompt(6, i), 4)));
  h.step();
  EXPECT_EQ(h.scheduler.n_running(), 2);
  EXPECT_EQ(h.scheduler.n_waiting(), 3);
  std::vector<RequestHandle> first_seen;
  while (h.scheduler.has_work()) {
    h.step();
    EXPECT_LE(h.scheduler.n_running(), 2);
  }
  for (auto handle : handles) {
    EXPECT_EQ(h.tokens[handle][0].size(), 4u);
  }
  // FIFO: a later request never starts before an earlier one.
  std::map<RequestHandle, std::size_t> start_step;
  for (std::size_t s = 0; s < h.plans.size(); ++s) {
    for (auto& row : h.plans[s].rows) start_step.emplace(row.handle, s);
  }
  for (std::size_t i = 1; i < handles.size(); ++i) EXPECT_LE(start_step[handles[i - 1]], start_step[handles[i]]);
  h.expect_pages_returned();
}

TEST(Scheduler, StopTokenIdsEosAndIgnoreEos) {
  auto o = small_options();
  Harness probe(o);
  auto r = make_request(iota_prompt(8), 10);
  const auto ref = reference_tokens(probe.model, r.prompt_token_ids, params_of(r, 7), 0, 10);
  {  // stop id = the 4th reference token
    Harness h(o);
    auto rs = r;
    rs.stop_token_ids = {ref[3]};
    const auto handle = h.add(rs);
    h.run_all();
    const auto first = std::find(ref.begin(), ref.end(), ref[3]) - ref.begin();
    EXPECT_EQ(h.tokens[handle][0], std::vector<TokenId>(ref.begin(), ref.begin() + first + 1));
    EXPECT_EQ(h.finish[handle][0], FinishReason::stop);
    EXPECT_EQ(h.all[handle].back().stop_token_id, ref[3]);
    h.expect_pages_returned();
  }
  {  // the same id as EOS, then ignored
    auto oe = o;
    oe.eos_token_ids = {ref[0]};
    Harness h(oe);
    const auto stopped = h.add(r);
    auto ri = r;
    ri.ignore_eos = true;
    const auto ignored = h.add(ri);
    h.run_all();
    EXPECT_EQ(h.tokens[stopped][0].size(), 1u);
    EXPECT_EQ(h.finish[stopped][0], FinishReason::stop);
    EXPECT_EQ(h.tokens[ignored][0], ref);
    EXPECT_EQ(h.finish[ignored][0], FinishReason::length);
  }
  {  // min_tokens: the EOS id cannot be drawn before it
    auto oe = o;
    oe.eos_token_ids = {ref[0]};
    Harness h(oe);
    auto rm = r;
    rm.min_tokens = 3;
    const auto handle = h.add(rm);
    h.run_all();
    ASSERT_GE(h.tokens[handle][0].size(), 3u);
    for (int i = 0; i < 3; ++i) EXPECT_NE(h.tokens[handle][0][std::size_t(i)], ref[0]);
  }
}

TEST(Scheduler, ContextLimitFinishesWithLength) {
  auto o = small_options();
  o.context_limit = 20;
  Harness h(o);
  const auto handle = h.add(make_request(iota_prompt(15), 100));
  h.run_all();
  EXPECT_EQ(h.tokens[handle][0].size(), 5u);
  EXPECT_EQ(h.finish[handle][0], FinishReason::length);
}

TEST(Scheduler, ChoicesForkThePromptAndFollowTheirOwnSeeds) {
  Harness h(small_options());
  auto r = make_request(iota_prompt(10), 15, 1.0f);
  r.n = 3;
  r.sampling.seed = 99;
  const auto handle = h.add(r);
  h.step();  // prompt computed once, three first tokens
  ASSERT_EQ(h.plans[0].rows.size(), 1u);
  EXPECT_EQ(h.tokens[handle].size(), 3u);
  h.step();
  EXPECT_EQ(h.plans[1].rows.size(), 3u);
  EXPECT_FALSE(h.plans[1].page_copies.empty());  // the shared partial prompt page is copied
  h.run_all();
  std::set<std::vector<TokenId>> distinct;
  for (std::int32_t c = 0; c < 3; ++c) {
    EXPECT_EQ(h.tokens[handle][c], reference_tokens(h.model, r.prompt_token_ids, params_of(r, 0), c, 15)) << c;
    distinct.insert(h.tokens[handle][c]);
  }
  EXPECT_GT(distinct.size(), 1u);
  EXPECT_EQ(h.last_usage[handle].n_generated_tokens, 45);
  h.expect_pages_returned();
}

TEST(Scheduler, SeedsReproducibleWhateverShares) {
  auto r = make_request(iota_prompt(9), 20, 0.9f);
  r.sampling.seed = 1234;
  r.sampling.top_k = 20;
  std::vector<TokenId> alone;
  {
    Harness h(small_options());
    const auto handle = h.add(r);
    h.run_all();
    alone = h.tokens[handle][0];
  }
  Harness h(small_options());
  h.add(make_request(iota_prompt(30, 5), 7, 1.0f));
  h.step();
  const auto handle = h.add(r);
  h.add(make_request(iota_prompt(3, 2), 9, 0.5f));
  h.run_all();
  EXPECT_EQ(h.tokens[handle][0], alone);
}

TEST(Scheduler, PrefixCacheReusesPromptAndAnswerPages) {
  Harness h(small_options());
  auto first = make_request(iota_prompt(18), 6);
  const auto a = h.add(first);
  h.run_all();
  EXPECT_EQ(h.last_usage[a].n_cached_prompt_tokens, 0);
  // Same prompt: 17 of 18 tokens come from the cache, its partial last page included (the last
  // token is recomputed for its logits).
  const auto b = h.add(first);
  h.run_all();
  EXPECT_EQ(h.last_usage[b].n_cached_prompt_tokens, 17);
  EXPECT_EQ(h.tokens[b][0], h.tokens[a][0]);
  // A next turn: prompt + answer + more, reusing the answer checkpoint.
  auto turn = first.prompt_token_ids;
  turn.insert(turn.end(), h.tokens[a][0].begin(), h.tokens[a][0].end());
  for (int i = 0; i < 5; ++i) turn.push_back(i + 3);
  auto second = make_request(turn, 6);
  const auto c = h.add(second);
  h.run_all();
  EXPECT_EQ(h.last_usage[c].n_cached_prompt_tokens, 23);  // 18 + 6 - 1 computed
  EXPECT_EQ(h.tokens[c][0], reference_tokens(h.model, turn, params_of(second, 7), 0, 6));
  EXPECT_EQ(h.scheduler.counters().n_prefix_hit_tokens, 40);
  EXPECT_EQ(h.scheduler.counters().n_prefix_queried_tokens, 18 + 18 + 29);
  h.expect_pages_returned();
}

TEST(Scheduler, PrefixCacheEvictedWhenPagesAreNeeded) {
  auto o = small_options();
  o.n_pages = 24;
  Harness h(o);
  for (int i = 0; i < 12; ++i) {
    auto r = make_request(iota_prompt(30, i * 3 + 1), 8);
    const auto handle = h.add(r);
    h.run_all();
    EXPECT_EQ(h.tokens[handle][0], reference_tokens(h.model, r.prompt_token_ids, params_of(r, 7), 0, 8));
  }
  EXPECT_LE(h.scheduler.prefix_cache().n_entries(), o.max_concurrency * o.prefix_checkpoints_per_slot);
  h.expect_pages_returned();
}

TEST(Scheduler, PreemptionRecomputesAndKeepsOutputsExact) {
  auto o = small_options();
  o.n_pages = 30;  // four requests of up to 50 tokens (13 pages each) do not fit at once
  Harness h(o);
  std::vector<std::pair<RequestHandle, GenerationRequest>> rs;
  for (int i = 0; i < 4; ++i) {
    auto r = make_request(iota_prompt(10, i + 1), 40, i % 2 ? 0.8f : 0.0f);
    r.n = i == 3 ? 2 : 1;
    rs.emplace_back(h.add(r), r);
  }
  h.run_all();
  EXPECT_GT(h.scheduler.counters().n_preemptions, 0);
  for (auto& [handle, r] : rs) {
    for (std::int32_t c = 0; c < r.n; ++c) {
      EXPECT_EQ(h.tokens[handle][c], reference_tokens(h.model, r.prompt_token_ids, params_of(r, 7), c, 40));
    }
  }
  h.expect_pages_returned();
}

TEST(Scheduler, CancelReturnsPagesAndAborts) {
  Harness h(small_options());
  const auto a = h.add(make_request(iota_prompt(10), 50));
  auto rn = make_request(iota_prompt(10, 4), 50, 1.0f);
  rn.n = 2;
  const auto b = h.add(rn);
  const auto waiting = h.add(make_request(iota_prompt(3), 5));
  for (int i = 0; i < 3; ++i) h.step();
  h.record(h.scheduler.cancel(a));
  EXPECT_EQ(h.finish[a][0], FinishReason::abort);
  EXPECT_TRUE(h.finished.count(a));
  h.record(h.scheduler.cancel_choice(b, 1));
  EXPECT_EQ(h.finish[b][1], FinishReason::abort);
  EXPECT_FALSE(h.finished.count(b));
  EXPECT_TRUE(h.scheduler.cancel(12345).empty());
  h.run_all();
  EXPECT_EQ(h.finish[b][0], FinishReason::length);
  EXPECT_TRUE(h.finished.count(waiting));
  h.expect_pages_returned();
}

TEST(Scheduler, CancellingTheLeadBeforeTheForkHandsItsPromptOn) {
  Harness h(small_options());
  auto r = make_request(iota_prompt(40), 6, 1.0f);
  r.n = 3;
  r.sampling.seed = 5;
  const auto handle = h.add(r);
  h.step();  // 16 of 40 prompt tokens, in choice 0's pages
  h.record(h.scheduler.cancel_choice(handle, 0));
  EXPECT_EQ(h.finish[handle][0], FinishReason::abort);
  h.run_all();
  EXPECT_EQ(h.plans[1].step.rows[0].start_position, 16);  // the prefill continues where it was
  for (std::int32_t c = 1; c < 3; ++c) {
    EXPECT_EQ(h.tokens[handle][c], reference_tokens(h.model, r.prompt_token_ids, params_of(r, 0), c, 6)) << c;
  }
  h.expect_pages_returned();
}

TEST(Scheduler, AdmissionWaitsForPagesWithoutPreemptingRunningRequests) {
  auto o = small_options();
  o.n_pages = 12;  // 48 tokens
  o.prefix_checkpoints_per_slot = 0;
  Harness h(o);
  const auto a = h.add(make_request(iota_prompt(20), 20));  // up to 10 pages
  h.step();
  const auto b = h.add(make_request(iota_prompt(20, 3), 4));
  for (int i = 0; i < 30 && !h.finished.count(a); ++i) h.step();
  EXPECT_EQ(h.scheduler.counters().n_preemptions, 0);
  h.run_all();
  EXPECT_EQ(h.tokens[a][0], reference_tokens(h.model, iota_prompt(20), params_of(h.requests[a], 7), 0, 20));
  EXPECT_EQ(h.tokens[b][0], reference_tokens(h.model, iota_prompt(20, 3), params_of(h.requests[b], 7), 0, 4));
  h.expect_pages_returned();
}

// Scheduler cost per step without a model (a benchmark, not a timed test):
//   unit_engine --gtest_also_run_disabled_tests --gtest_filter='*StepOverhead*'
TEST(Scheduler, DISABLED_StepOverhead) {
  for (std::int32_t n_rows : {8, 64, 256}) {
    auto o = small_options();
    o.max_concurrency = n_rows;
    o.page_size_tokens = 16;
    o.n_pages = n_rows * 80;
    o.context_limit = 4096;
    o.prefill_chunk_tokens = 2048;
    Scheduler scheduler(o);
    for (std::int32_t i = 0; i < n_rows; ++i) {
      auto r = make_request(iota_prompt(100, i), 1000);
      scheduler.add(RequestHandle(i + 1), r, params_of(r, 1), 0.0);
    }
    StepResults results;
    double schedule_s = 0, apply_s = 0;
    std::int32_t n_steps = 0;
    for (int step = 0; step < 200; ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      StepPlan plan = scheduler.schedule(double(step));
      const auto t1 = std::chrono::steady_clock::now();
      // Every row to the host: this measures apply()'s own sampling.
      std::vector<float>& logits = results.host_logits;
      logits.assign(std::size_t(plan.step.n_logit_rows()) * kVocab, 0.0f);
      for (std::size_t j = 0; j < logits.size(); j += kVocab) logits[j + (j / kVocab) % kVocab] = 1.0f;
      scheduler.apply(plan, sampling_plan_host_only(plan.step.n_logit_rows()), results, kVocab);
      const auto t2 = std::chrono::steady_clock::now();
      if (step >= 50) {  // decode-only steady state
        schedule_s += std::chrono::duration<double>(t1 - t0).count();
        apply_s += std::chrono::duration<double>(t2 - t1).count();
        ++n_steps;
      }
    }
    std::printf("[ overhead ] %d decode rows: schedule %.1f us, apply (greedy, vocab %d) %.1f us per step\n", n_rows,
                1e6 * schedule_s / n_steps, kVocab, 1e6 * apply_s / n_steps);
  }
}

TEST(Scheduler, LogprobsAndPromptLogprobs) {
  Harness h(small_options());
  auto r = make_request(iota_prompt(9), 3);
  r.logprobs = true;
  r.top_logprobs = 2;
  r.prompt_logprobs = true;
  const auto handle = h.add(r);
  h.run_all();
  const auto& first = h.all[handle].front();
  ASSERT_EQ(first.prompt_tokens.size(), 9u);
  for (std::size_t p = 1; p < 9; ++p) {
    std::vector<TokenId> prefix(r.prompt_token_ids.begin(), r.prompt_token_ids.begin() + std::ptrdiff_t(p));
    const auto logits = h.model.logits_for(prefix);
    double sum = 0;
    const float mx = *std::max_element(logits.begin(), logits.end());
    for (float x : logits) sum += std::exp(double(x) - mx);
    EXPECT_NEAR(first.prompt_tokens[p].logprob, logits[std::size_t(r.prompt_token_ids[p])] - mx - std::log(sum), 1e-4);
    EXPECT_EQ(first.prompt_tokens[p].top_logprobs.size(), 2u);
  }
  for (const auto& o : h.all[handle]) {
    for (const auto& t : o.tokens) {
      EXPECT_EQ(t.top_logprobs.size(), 2u);
      EXPECT_EQ(t.top_logprobs[0].token_id, t.token_id);  // greedy picks the best
      EXPECT_LE(t.logprob, 0.0f);
    }
  }
}

TEST(Scheduler, RandomSubmitCancelSequencesReturnEveryPage) {
  std::mt19937 rng(42);
  std::int64_t n_preemptions = 0, n_hit_tokens = 0, n_copies = 0;
  for (int round = 0; round < 250; ++round) {
    auto o = small_options();
    o.n_pages = 12 + int(rng() % 40);
    o.max_concurrency = 1 + int(rng() % 5);
    o.prefill_chunk_tokens = 1 + int(rng() % 20);
    o.page_size_tokens = 1 + int(rng() % 6);
    o.context_limit = 40;
    o.scheduler_policy = rng() % 2 ? SchedulerPolicy::throughput : SchedulerPolicy::balanced;
    o.prefix_checkpoints_per_slot = int(rng() % 3);
    o.eos_token_ids = {int(rng() % kVocab)};
    Harness h(o);
    std::vector<RequestHandle> live;
    for (int event = 0; event < 150; ++event) {
      const int what = int(rng() % 10);
      if (what < 3) {
        auto r = make_request(iota_prompt(1 + int(rng() % 25), int(rng() % 9)), 1 + int(rng() % 12),
                              rng() % 2 ? 0.0f : 1.0f);
        r.n = 1 + int(rng() % 3);
        r.n = std::min(r.n, o.max_concurrency);
        if (rng() % 3 == 0) r.stop_token_ids = {int(rng() % kVocab)};
        const auto pages = (std::int64_t(r.prompt_token_ids.size()) + r.max_tokens + o.page_size_tokens) /
                           o.page_size_tokens * r.n + 1;
        if (pages > o.n_pages) continue;  // admission would reject it
        live.push_back(h.add(r, rng()));
      } else if (what == 3 && !live.empty()) {
        h.record(h.scheduler.cancel(live[rng() % live.size()]));
      } else if (what == 4 && !live.empty()) {
        h.record(h.scheduler.cancel_choice(live[rng() % live.size()], int(rng() % 3)));
      } else {
        h.step();
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
    h.run_all();
    for (auto handle : live) EXPECT_TRUE(h.finished.count(handle)) << "round " << round;
    // Uncancelled greedy choices that ran to their end match the reference exactly.
    for (auto handle : live) {
      const auto& r = h.requests[handle];
      if (r.sampling.temperature != 0.0f || !r.stop_token_ids.empty()) continue;
      for (auto& [c, reason] : h.finish[handle]) {
        if (reason != FinishReason::length) continue;
        const auto& got = h.tokens[handle][c];
        EXPECT_EQ(got, reference_tokens(h.model, r.prompt_token_ids, params_of(r, 0), c, std::int32_t(got.size())));
      }
    }
    n_preemptions += h.scheduler.counters().n_preemptions;
    n_hit_tokens += h.scheduler.counters().n_prefix_hit_tokens;
    for (const auto& plan : h.plans) n_copies += std::int64_t(plan.page_copies.size());
    h.expect_pages_returned();
  }
  // The sequences reach preemption, prefix-cache hits and copy-on-write.
  EXPECT_GT(n_preemptions, 0);
  EXPECT_GT(n_hit_tokens, 0);
  EXPECT_GT(n_copies, 0);
}

}  // namespace
}  // namespace flare::engine
