// Speculative verification keeps the target distribution: a statistical test of the scheduler's
// verify rows (plan_sampling draws each position as ordinary decoding would, apply_verify_row
// keeps the draws while they equal the drafts) with helios::sample_token, the CPU backend's
// sampler, at temperature 1.3 and top-p 0.9 over an 8-token vocabulary. 10^5 seeded rounds, each
// a fresh request: a prefill draws the pending token, then one verify row checks one learned draft
// (a perturbed copy of the target: about one draft in four is accepted). The tokens
// emitted at verify positions 0 and 1 are tallied per context (the tokens before them) and compared
// by chi-square with the target's processed distribution for that context, computed here from its
// definition (softmax of logits / T, the smallest best-first prefix reaching top_p). Each must
// pass at p > 0.001; the same draws under a deliberately broken acceptance rule (every draft
// accepted) must fail at p < 0.001, so the test can tell.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include "engine/draft_plan.h"
#include "engine/scheduler.h"
#include "fake_model.h"

namespace flare::engine {
namespace {

using testing::FakeModel;

constexpr std::int32_t kVocab = 8;
constexpr int kRounds = 100000;
constexpr float kTemperature = 1.3f;
constexpr float kTopP = 0.9f;

// The distribution ordinary decoding draws from after `logits` (no penalties in these requests).
std::vector<double> target_distribution(const std::vector<float>& logits) {
  std::vector<std::int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return logits[std::size_t(a)] > logits[std::size_t(b)] || (logits[std::size_t(a)] == logits[std::size_t(b)] && a < b);
  });
  std::vector<double> p(logits.size(), 0.0);
  double total = 0.0;
  for (std::size_t v = 0; v < logits.size(); ++v) total += (p[v] = std::exp(double(logits[v]) / kTemperature));
  double mass = 0.0;
  std::size_t n_kept = order.size();
  for (std::size_t i = 0; i < order.size(); ++i) {
    mass += p[std::size_t(order[i])] / total;
    if (mass >= kTopP) {
      n_kept = i + 1;
      break;
    }
  }
  double kept = 0.0;
  for (std::size_t i = 0; i < n_kept; ++i) kept += p[std::size_t(order[i])];
  std::vector<double> out(logits.size(), 0.0);
  for (std::size_t i = 0; i < n_kept; ++i) out[std::size_t(order[i])] = p[std::size_t(order[i])] / kept;
  return out;
}

// The upper tail of the chi-square distribution, Q(df / 2, x / 2): the regularized incomplete
// gamma function by its series below a + 1 and its continued fraction above.
double chi_square_p_value(double x, int df) {
  const double a = df / 2.0, z = x / 2.0;
  if (z <= 0.0) return 1.0;
  const double log_prefix = a * std::log(z) - z - std::lgamma(a);
  if (z < a + 1.0) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000 && term > sum * 1e-15; ++n) sum += (term *= z / (a + n));
    return 1.0 - sum * std::exp(log_prefix);
  }
  // Lentz's method for the continued fraction of Q.
  double b = z + 1.0 - a, c = 1e300, d = 1.0 / b, h = d;
  for (int n = 1; n < 10000; ++n) {
    const double an = -n * (n - a);
    b += 2.0;
    d = an * d + b;
    d = std::abs(d) < 1e-300 ? 1e-300 : d;
    c = b + an / c;
    c = std::abs(c) < 1e-300 ? 1e-300 : c;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1.0) < 1e-15) break;
  }
  return std::exp(log_prefix) * h;
}

// Emitted tokens per context (the generated tokens before them), with the target for the context.
struct Tally {
  std::map<std::vector<std::int32_t>, std::vector<std::int64_t>> counts;
  std::map<std::vector<std::int32_t>, std::vector<double>> expected;
  std::int64_t n = 0;
  std::int64_t n_impossible = 0;  // tokens the target gives probability 0

  void add(const FakeModel& model, const std::vector<std::int32_t>& prompt, const std::vector<std::int32_t>& context,
           std::int32_t token) {
    auto& count = counts[context];
    if (count.empty()) {
      count.assign(kVocab, 0);
      std::vector<std::int32_t> all = prompt;
      all.insert(all.end(), context.begin(), context.end());
      expected[context] = target_distribution(model.logits_for(all));
    }
    ++count[std::size_t(token)];
    ++n;
    if (expected[context][std::size_t(token)] == 0.0) ++n_impossible;
  }

  // Pearson's statistic over every (context, token) cell with an expected count of at least 5
  // (smaller ones pooled per context); returns the p-value.
  double p_value(int* df_out = nullptr) const {
    double x = 0.0;
    int df = 0;
    for (const auto& [context, count] : counts) {
      const auto n_context = double(std::accumulate(count.begin(), count.end(), std::int64_t{0}));
      const auto& p = expected.at(context);
      int n_cells = 0;
      double pooled_observed = 0.0, pooled_expected = 0.0;
      for (std::size_t v = 0; v < count.size(); ++v) {
        const double e = n_context * p[v];
        if (e == 0.0) continue;
        if (e < 5.0) {
          pooled_observed += double(count[v]);
          pooled_expected += e;
          continue;
        }
        x += (double(count[v]) - e) * (double(count[v]) - e) / e;
        ++n_cells;
      }
      if (pooled_expected >= 5.0) {
        x += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
        ++n_cells;
      }
      if (n_cells > 1) df += n_cells - 1;
    }
    if (df_out) *df_out = df;
    return df == 0 ? 1.0 : chi_square_p_value(x, df);
  }
};

TEST(ChiSquare, PValuesOfKnownPoints) {
  EXPECT_NEAR(chi_square_p_value(3.841, 1), 0.05, 1e-4);
  EXPECT_NEAR(chi_square_p_value(18.307, 10), 0.05, 1e-4);
  EXPECT_NEAR(chi_square_p_value(29.588, 10), 0.001, 1e-5);
  EXPECT_NEAR(chi_square_p_value(1.0, 2), std::exp(-0.5), 1e-12);
}

TEST(RejectionSampling, VerifyRowsKeepTheTargetDistribution) {
  EngineOptions o;
  o.max_concurrency = 1;
  o.prefill_chunk_tokens = 16;
  o.page_size_tokens = 4;
  o.n_pages = 64;
  o.context_limit = 32;
  o.eos_token_ids = {};
  o.max_draft_tokens = 1;
  o.learned_drafts = true;
  o.adaptive_verification = false;  // every round drafts
  Scheduler scheduler(o);
  FakeModel target(o.n_pages, o.page_size_tokens, kVocab);
  FakeModel draft(o.n_pages, o.page_size_tokens, kVocab);
  draft.perturb = 3;
  const std::vector<std::int32_t> prompt = {3, 1, 4, 1, 5};

  Tally engine_tally[2], broken_tally[2];  // [verify position]
  std::int64_t n_verify_rows = 0;
  double now_ms = 0.0;
  for (int round = 0; round < kRounds; ++round) {
    GenerationRequest request;
    request.prompt_token_ids = prompt;
    request.max_tokens = 3;  // the pending token, then verify positions 0 and 1
    request.sampling.temperature = kTemperature;
    request.sampling.top_p = kTopP;
    helios::SamplingParams params;
    params.temperature = kTemperature;
    params.top_p = kTopP;
    params.seed = std::uint64_t(round) * 0x9E3779B97F4A7C15ull + 1;
    scheduler.add(RequestHandle(round + 1), request, params, now_ms);
    std::vector<std::int32_t> generated;
    std::vector<std::int32_t> broken;  // the same draws, every draft accepted
    std::size_t n_from_verify = 0;     // tokens the verify row emitted (2: its draft was accepted)
    while (scheduler.has_work()) {
      StepPlan plan = scheduler.schedule(now_ms);
      now_ms += 1.0;
      ASSERT_FALSE(plan.empty());
      if (!plan.draft.empty()) {
        std::vector<std::vector<TokenId>> drafts;
        bool first = true;
        draft_proposal_run(plan.draft, [&](const helios::Step& s) {
          const auto copies = first ? std::span<const helios::PageCopy>(plan.page_copies) : std::span<const helios::PageCopy>();
          first = false;
          return draft.greedy(s, copies);
        }, drafts);
        scheduler.fill_drafts(plan, drafts);
      }
      const SamplingPlan sampling = scheduler.plan_sampling(plan, kVocab);
      StepResults results;
      target.run(plan.step, plan.page_copies, sampling, results);
      const bool verify = plan.rows.size() == 1 && plan.rows[0].n_drafts == 1;
      if (verify) {
        ++n_verify_rows;
        ASSERT_EQ(results.sampled.size(), 2u);
        broken = {plan.step.tokens.at(1), results.sampled[1].token};  // draft 0 kept whatever was drawn
      }
      const std::size_t n_before = generated.size();
      for (const auto& outputs : scheduler.apply(plan, sampling, results, kVocab)) {
        for (const auto& output : outputs.outputs) {
          for (const auto& token : output.tokens) generated.push_back(token.token_id);
        }
      }
      if (verify) n_from_verify = generated.size() - n_before;
    }
    ASSERT_GE(generated.size(), 2u);
    ASSERT_EQ(broken.size(), 2u) << "round " << round << " had no verify row";
    const std::vector<std::int32_t> pending = {generated[0]};
    engine_tally[0].add(target, prompt, pending, generated[1]);
    if (n_from_verify == 2) engine_tally[1].add(target, prompt, {generated[0], generated[1]}, generated[2]);
    broken_tally[0].add(target, prompt, pending, broken[0]);
    broken_tally[1].add(target, prompt, {generated[0], broken[0]}, broken[1]);
  }
  EXPECT_EQ(n_verify_rows, kRounds);
  EXPECT_GE(engine_tally[1].n, kRounds / 5);  // position 1 is reached when the draft was right
  EXPECT_LT(engine_tally[1].n, kRounds);      // and not always: drafts are also rejected
  for (int position = 0; position < 2; ++position) {
    int df = 0;
    const double p = engine_tally[position].p_value(&df);
    EXPECT_GT(p, 0.001) << "verify position " << position << ": " << engine_tally[position].n << " draws, df " << df;
    EXPECT_GT(df, 8) << "too few cells for the test to mean anything";
    EXPECT_EQ(engine_tally[position].n_impossible, 0) << "a token top-p cut off was emitted";
  }
  const double broken_p = broken_tally[0].p_value();
  EXPECT_LT(broken_p, 0.001) << "always accepting the draft must be detected";
}

}  // namespace
}  // namespace flare::engine
