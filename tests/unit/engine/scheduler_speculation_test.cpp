// Speculative decoding in the scheduler, against the fake model in its copying mode (its favourite
// token repeats the sequence with a period, so history drafts are often right and sometimes not):
// outputs equal ordinary decoding token for token, greedy and sampled (the same draws), through
// batching, n > 1, prefix-cache hits, preemption, stop tokens and max_tokens inside an accepted run,
// and logprobs; every page comes back.
#include <gtest/gtest.h>

#include <random>

#include "engine/scheduler.h"
#include "fake_model.h"
#include "scheduler_harness.h"

namespace flare::engine {
namespace {

using testing::Harness;
using testing::iota_prompt;
using testing::kVocab;
using testing::make_request;
using testing::params_of;
using testing::reference_tokens;
using testing::small_options;

EngineOptions speculative_options(std::int32_t max_drafts = 4) {
  EngineOptions o = small_options();
  o.max_draft_tokens = max_drafts;
  o.history_drafts = true;
  return o;
}

// A prompt that already repeats with `period`, so drafts exist from the first decode step.
std::vector<TokenId> periodic_prompt(std::int32_t n, std::int32_t period, std::int32_t start = 3) {
  std::vector<TokenId> p;
  for (std::int32_t i = 0; i < n; ++i) p.push_back((start + (i % period) * 5) % kVocab);
  return p;
}

// Runs the requests with and without speculation; returns both harnesses' tokens per request.
struct Pair {
  Harness plain;
  Harness speculative;
  Pair(EngineOptions o, std::int32_t copy_period) : plain(disable(o)), speculative(o) {
    plain.model.copy_period = copy_period;
    speculative.model.copy_period = copy_period;
  }
  static EngineOptions disable(EngineOptions o) {
    o.max_draft_tokens = 0;
    o.history_drafts = false;
    return o;
  }
  void add(const GenerationRequest& r, std::uint64_t seed) {
    plain.add(r, seed);
    speculative.add(r, seed);
  }
  void run_and_compare() {
    plain.run_all();
    speculative.run_all();
    EXPECT_EQ(speculative.tokens, plain.tokens);
    EXPECT_EQ(speculative.finish, plain.finish);
    for (const auto& [handle, usage] : plain.last_usage) {
      EXPECT_EQ(speculative.last_usage[handle].n_generated_tokens, usage.n_generated_tokens) << "request " << handle;
    }
    plain.expect_pages_returned();
    speculative.expect_pages_returned();
  }
};

TEST(SchedulerSpeculation, GreedyEqualsOrdinaryDecodingAndAcceptsDrafts) {
  Pair p(speculative_options(), 6);
  const auto r = make_request(periodic_prompt(20, 6), 40);
  p.add(r, 7);
  p.run_and_compare();
  EXPECT_EQ(p.plain.tokens[1][0], reference_tokens(p.plain.model, r.prompt_token_ids, params_of(r, 7), 0, 40));
  const auto& counters = p.speculative.scheduler.counters();
  EXPECT_GT(counters.n_verify_rows, 0);
  EXPECT_GT(counters.n_accepted_draft_tokens, 0);
  EXPECT_LE(counters.n_accepted_draft_tokens, counters.n_draft_tokens);
  EXPECT_LT(p.speculative.scheduler.counters().n_steps, p.plain.scheduler.counters().n_steps);
}

TEST(SchedulerSpeculation, SampledRowsDrawTheSameTokens) {
  Pair p(speculative_options(5), 4);
  for (int i = 0; i < 3; ++i) {
    auto r = make_request(periodic_prompt(12 + i, 4, 1 + i), 30, 1.0f);
    r.sampling.top_p = 0.9f;
    r.sampling.repetition_penalty = 1.2f;  // penalties see the drafts before each position
    p.add(r, 100 + std::uint64_t(i));
  }
  p.run_and_compare();
  EXPECT_GT(p.speculative.scheduler.counters().n_accepted_draft_tokens, 0);
  EXPECT_LT(p.speculative.scheduler.counters().n_accepted_draft_tokens,
            p.speculative.scheduler.counters().n_draft_tokens);  // and some drafts are rejected
}

TEST(SchedulerSpeculation, StopTokenAndMaxTokensInsideAnAcceptedRun) {
  Pair p(speculative_options(6), 5);
  const auto prompt = periodic_prompt(15, 5);
  auto stop = make_request(prompt, 40);
  stop.stop_token_ids = {prompt[2]};  // reached inside a run of accepted drafts
  p.add(stop, 1);
  auto length = make_request(prompt, 7);  // ends mid-run
  p.add(length, 2);
  auto min_tokens = make_request(prompt, 20);
  min_tokens.stop_token_ids = {prompt[1]};
  min_tokens.min_tokens = 6;  // the stop id is banned at early draft positions only
  p.add(min_tokens, 3);
  p.run_and_compare();
  EXPECT_EQ(p.speculative.finish[1][0], FinishReason::stop);
  EXPECT_EQ(p.speculative.finish[2][0], FinishReason::length);
  EXPECT_EQ(p.speculative.tokens[2][0].size(), 7u);
}

TEST(SchedulerSpeculation, ChoicesPrefixHitsAndLogprobs) {
  Pair p(speculative_options(), 6);
  auto forked = make_request(periodic_prompt(18, 6), 25, 1.0f);
  forked.n = 3;
  p.add(forked, 11);
  p.plain.run_all();  // its prompt is in the prefix cache before the next request arrives
  p.speculative.run_all();
  auto logprobs = make_request(periodic_prompt(18, 6), 20);
  logprobs.logprobs = true;
  logprobs.top_logprobs = 2;
  p.add(logprobs, 12);  // also a prefix-cache hit on the first prompt
  p.run_and_compare();
  const auto& plain = p.plain.all[2];
  const auto& speculative = p.speculative.all[2];
  std::vector<TokenOutput> a, b;
  for (const auto& o : plain) a.insert(a.end(), o.tokens.begin(), o.tokens.end());
  for (const auto& o : speculative) b.insert(b.end(), o.tokens.begin(), o.tokens.end());
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_FLOAT_EQ(b[i].logprob, a[i].logprob) << i;  // the target's logprobs, not the draft's
    ASSERT_EQ(b[i].top_logprobs.size(), 2u);
    EXPECT_EQ(b[i].top_logprobs[1].token_id, a[i].top_logprobs[1].token_id);
  }
  EXPECT_GT(p.speculative.scheduler.counters().n_prefix_hit_tokens, 0);
}

// Allows only even tokens: a constrained choice runs its rules on the host, so it never drafts.
class EvenTokens final : public TokenConstraint {
 public:
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<EvenTokens>(*this); }
  TokenRule next(std::int32_t) override {
    TokenRule rule{TokenRule::Kind::allowed, {}};
    for (TokenId t = 0; t < kVocab; t += 2) rule.tokens.push_back(t);
    return rule;
  }
  void accept(TokenId token) override { EXPECT_EQ(token % 2, 0); }
  bool finished() const override { return false; }
};

TEST(SchedulerSpeculation, ConstrainedChoicesNeverDraft) {
  Pair p(speculative_options(), 4);
  auto r = make_request(periodic_prompt(16, 4, 2), 20);
  r.constraint = std::make_shared<EvenTokens>();
  p.add(r, 5);
  p.run_and_compare();
  EXPECT_EQ(p.speculative.n_verify_rows, 0);
  EXPECT_EQ(p.speculative.scheduler.counters().n_verify_rows, 0);
}

// Step costs the package measured at export seed adaptive verification: where a verify round
// costs five decode steps, no acceptance rate pays for drafts, so rows decode ordinarily (trying one
// draft every few rounds) from the first step; the same costs measured cheap let every round draft.
TEST(SchedulerSpeculation, MeasuredStepCostsSeedTheVerifyPolicy) {
  EngineOptions expensive = speculative_options(4);
  expensive.measured_step_costs = {{1, 1, 2.0}, {1, 2, 10.0}, {1, 3, 10.0}, {1, 4, 10.0}, {1, 5, 10.0}};
  EngineOptions cheap = speculative_options(4);
  cheap.measured_step_costs = {{1, 1, 2.0}, {1, 2, 2.05}, {1, 3, 2.1}, {1, 4, 2.15}, {1, 5, 2.2}};
  Scheduler seeded(expensive);
  EXPECT_NEAR(seeded.verify_policy().relative_cost(1, 4), 5.0, 1e-9);
  EXPECT_NEAR(Scheduler(cheap).verify_policy().relative_cost(1, 4), 1.1, 1e-9);

  Pair p_expensive(expensive, 4), p_cheap(cheap, 4);
  p_expensive.add(make_request(periodic_prompt(16, 4, 2), 40), 5);
  p_cheap.add(make_request(periodic_prompt(16, 4, 2), 40), 5);
  p_expensive.run_and_compare();
  p_cheap.run_and_compare();
  EXPECT_GT(p_cheap.speculative.scheduler.counters().n_verify_rows, 4);
  EXPECT_LE(p_expensive.speculative.scheduler.counters().n_verify_rows, 40 / 8 + 1);  // retries only
  EXPECT_LT(p_expensive.speculative.scheduler.counters().n_verify_rows,
            p_cheap.speculative.scheduler.counters().n_verify_rows);
}

TEST(SchedulerSpeculation, UnpredictableOutputStillMatches) {
  Pair p(speculative_options(), 0);  // hash favourites: history rarely predicts them
  p.add(make_request(iota_prompt(9), 30), 5);
  p.add(make_request(iota_prompt(9, 4), 30, 1.0f), 6);
  p.run_and_compare();
}

TEST(SchedulerSpeculation, RandomWorkloadsMatchOrdinaryDecodingAndReturnEveryPage) {
  std::mt19937 rng(17);
  std::int64_t n_accepted = 0, n_preemptions = 0;
  for (int round = 0; round < 120; ++round) {
    auto o = speculative_options(1 + int(rng() % 7));
    o.n_pages = 14 + int(rng() % 40);
    o.max_concurrency = 1 + int(rng() % 5);
    o.prefill_chunk_tokens = 1 + int(rng() % 20);
    o.page_size_tokens = 1 + int(rng() % 6);
    o.context_limit = 48;
    o.scheduler_policy = rng() % 2 ? SchedulerPolicy::throughput : SchedulerPolicy::balanced;
    o.prefix_checkpoints_per_slot = int(rng() % 3);
    o.eos_token_ids = {int(rng() % kVocab)};
    Pair p(o, 2 + int(rng() % 6));
    for (int i = 0, n = 1 + int(rng() % 6); i < n; ++i) {
      const std::int32_t period = 2 + std::int32_t(rng() % 5);
      auto r = make_request(periodic_prompt(1 + int(rng() % 20), period, int(rng() % 9)), 1 + int(rng() % 20),
                            rng() % 2 ? 0.0f : 1.0f);
      r.n = std::min(1 + int(rng() % 3), o.max_concurrency);
      if (rng() % 3 == 0) r.stop_token_ids = {int(rng() % kVocab)};
      const auto pages = (std::int64_t(r.prompt_token_ids.size()) + r.max_tokens + o.page_size_tokens) /
                         o.page_size_tokens * r.n + 1;
      if (pages > o.n_pages) continue;  // admission would reject it
      p.add(r, rng());
    }
    p.run_and_compare();
    if (::testing::Test::HasFailure()) FAIL() << "round " << round;
    n_accepted += p.speculative.scheduler.counters().n_accepted_draft_tokens;
    n_preemptions += p.speculative.scheduler.counters().n_preemptions;
  }
  EXPECT_GT(n_accepted, 0);
  EXPECT_GT(n_preemptions, 0);
}

}  // namespace
}  // namespace flare::engine

namespace flare::engine {
namespace {

EngineOptions learned_options(std::int32_t max_drafts = 4) {
  EngineOptions o = testing::small_options();
  o.max_draft_tokens = max_drafts;
  o.learned_drafts = true;
  return o;
}

// A draft model equal to the target accepts every greedy draft, which it does only if its KV
// followed every sequence exactly (prefill chunks, accepted runs, forks, prefix hits, preemption).
TEST(SchedulerLearnedDrafts, AnIdenticalDraftAcceptsEveryGreedyDraft) {
  auto o = learned_options(5);
  o.n_pages = 24;  // small enough to preempt
  Pair p(o, 0);
  for (int i = 0; i < 5; ++i) {
    auto r = make_request(iota_prompt(5 + 3 * i, i), 30);
    r.n = i == 2 ? 2 : 1;
    p.add(r, std::uint64_t(i));
  }
  p.run_and_compare();
  const auto& c = p.speculative.scheduler.counters();
  EXPECT_GT(c.n_verify_rows, 0);
  EXPECT_EQ(c.n_accepted_draft_tokens, c.n_draft_tokens);
  EXPECT_GT(c.n_preemptions, 0);
}

TEST(SchedulerLearnedDrafts, ADisagreeingDraftChangesNoTokenGreedyOrSampled) {
  Pair p(learned_options(4), 0);
  p.speculative.draft->perturb = 3;
  for (int i = 0; i < 4; ++i) {
    auto r = make_request(iota_prompt(9 + i, 2 * i), 28, i % 2 ? 1.0f : 0.0f);
    r.sampling.top_k = 8;
    p.add(r, 50 + std::uint64_t(i));
  }
  p.run_and_compare();
  const auto& c = p.speculative.scheduler.counters();
  EXPECT_GT(c.n_accepted_draft_tokens, 0);
  EXPECT_LT(c.n_accepted_draft_tokens, c.n_draft_tokens);
}

TEST(SchedulerLearnedDrafts, HistoryDraftsFirstThenTheDraftModel) {
  auto o = learned_options(4);
  o.history_drafts = true;
  Pair p(o, 5);
  p.speculative.draft->copy_period = 5;
  p.add(make_request(periodic_prompt(7, 5), 30), 1);
  p.add(make_request(iota_prompt(6, 3), 30), 2);
  p.run_and_compare();
  const auto& c = p.speculative.scheduler.counters();
  EXPECT_EQ(c.n_accepted_draft_tokens, c.n_draft_tokens);  // both sources agree with the target
}

TEST(SchedulerLearnedDrafts, PrefixHitsResumeTheDraftFromCheckpointedPages) {
  Pair p(learned_options(3), 0);
  const auto prompt = iota_prompt(21, 5);
  p.add(make_request(prompt, 10), 1);
  p.plain.run_all();
  p.speculative.run_all();
  p.add(make_request(prompt, 16), 2);  // hits the prompt's checkpoint
  p.run_and_compare();
  const auto& c = p.speculative.scheduler.counters();
  EXPECT_GT(c.n_prefix_hit_tokens, 0);
  EXPECT_EQ(c.n_accepted_draft_tokens, c.n_draft_tokens);
}

TEST(SchedulerLearnedDrafts, RandomWorkloadsMatchOrdinaryDecodingAndReturnEveryPage) {
  std::mt19937 rng(23);
  for (int round = 0; round < 100; ++round) {
    auto o = learned_options(1 + int(rng() % 6));
    o.history_drafts = rng() % 2 == 0;
    o.n_pages = 14 + int(rng() % 40);
    o.max_concurrency = 1 + int(rng() % 5);
    o.prefill_chunk_tokens = 1 + int(rng() % 20);
    o.page_size_tokens = 1 + int(rng() % 6);
    o.context_limit = 48;
    o.prefix_checkpoints_per_slot = int(rng() % 3);
    o.eos_token_ids = {int(rng() % testing::kVocab)};
    Pair p(o, 2 + int(rng() % 6));
    p.speculative.draft->copy_period = p.plain.model.copy_period;
    p.speculative.draft->perturb = int(rng() % 4);
    for (int i = 0, n = 1 + int(rng() % 6); i < n; ++i) {
      auto r = make_request(periodic_prompt(1 + int(rng() % 20), 2 + std::int32_t(rng() % 5), int(rng() % 9)),
                            1 + int(rng() % 20), rng() % 2 ? 0.0f : 1.0f);
      r.n = std::min(1 + int(rng() % 3), o.max_concurrency);
      if (rng() % 3 == 0) r.stop_token_ids = {int(rng() % testing::kVocab)};
      const auto pages = (std::int64_t(r.prompt_token_ids.size()) + r.max_tokens + o.page_size_tokens) /
                         o.page_size_tokens * r.n + 1;
      if (pages > o.n_pages) continue;
      p.add(r, rng());
    }
    p.run_and_compare();
    if (::testing::Test::HasFailure()) FAIL() << "round " << round;
  }
}

}  // namespace
}  // namespace flare::engine
