// Constrained decoding in the engine: a request's TokenConstraint is cloned per choice, its rules
// decide each sampled token (forced tokens, allowed lists), the choice ends with `stop` when the
// constraint is finished, and logprobs stay the raw model's.
#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <map>
#include <mutex>

#include "common/error.h"
#include "engine/constrained_sampling.h"
#include "engine/engine.h"
#include "fake_model.h"

namespace flare::engine {
namespace {

constexpr std::int32_t kVocab = 40;

// A scripted constraint: at each step either a forced token or an allowed set; then finished.
class ScriptConstraint final : public TokenConstraint {
 public:
  explicit ScriptConstraint(std::vector<TokenRule> script) : script_(std::move(script)) {}
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<ScriptConstraint>(*this); }
  TokenRule next(std::int32_t n_tokens_left) override {
    last_n_left = n_tokens_left;
    return script_.at(position_);
  }
  void accept(TokenId token) override {
    const TokenRule& rule = script_.at(position_);
    EXPECT_NE(std::find(rule.tokens.begin(), rule.tokens.end(), token), rule.tokens.end()) << token;
    ++position_;
  }
  bool finished() const override { return position_ == script_.size(); }
  std::int32_t last_n_left = -1;

 private:
  std::vector<TokenRule> script_;
  size_t position_ = 0;
};

class Runner : public StepRunner {
 public:
  explicit Runner(const EngineOptions& o) : model(o.n_pages, o.page_size_tokens, kVocab) {}
  std::int32_t vocab_size() const override { return kVocab; }
  void run(const helios::Step& step, std::span<const helios::PageCopy> copies, const SamplingPlan& plan,
           StepResults& out) override {
    model.run(step, copies, plan, out);
  }
  testing::FakeModel model;
};

class Sink : public OutputSink {
 public:
  void on_output(StepOutput output) override {
    std::lock_guard lock(mutex);
    for (auto& t : output.tokens) tokens[output.choice_index].push_back(t);
    if (output.finish_reason != FinishReason::none) reasons[output.choice_index] = output.finish_reason;
    if (output.request_finished) done.set_value();
  }
  std::mutex mutex;
  std::map<std::int32_t, std::vector<TokenOutput>> tokens;
  std::map<std::int32_t, FinishReason> reasons;
  std::promise<void> done;
};

EngineOptions options() {
  EngineOptions o;
  o.max_concurrency = 4;
  o.prefill_chunk_tokens = 16;
  o.page_size_tokens = 8;
  o.n_pages = 64;
  o.context_limit = 128;
  o.max_waiting = 16;
  o.eos_token_ids = {0};
  return o;
}

TokenRule forced(TokenId token) { return {TokenRule::Kind::forced, {token}}; }
TokenRule allowed(std::vector<TokenId> tokens) { return {TokenRule::Kind::allowed, std::move(tokens)}; }

TEST(ConstrainedDecoding, EveryChoiceFollowsItsRulesAndStopsWhenFinished) {
  const EngineOptions o = options();
  auto runner = std::make_unique<Runner>(o);
  Runner* model = runner.get();
  LocalEngine engine(o, std::move(runner));
  GenerationRequest request;
  request.prompt_token_ids = {5, 6, 7, 8, 9, 10, 11, 12, 13};
  request.max_tokens = 20;
  request.n = 3;
  request.sampling.temperature = 1.0f;
  request.sampling.seed = 3;
  request.logprobs = true;
  request.top_logprobs = 2;
  request.constraint = std::make_shared<ScriptConstraint>(
      std::vector<TokenRule>{forced(17), forced(0), allowed({3, 4, 31}), forced(22)});
  auto sink = std::make_shared<Sink>();
  ASSERT_FALSE(engine.submit(request, sink).rejected);
  ASSERT_EQ(sink->done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  engine.wait_idle();
  ASSERT_EQ(sink->tokens.size(), 3u);
  for (const auto& [choice, tokens] : sink->tokens) {
    ASSERT_EQ(tokens.size(), 4u) << "choice " << choice;
    EXPECT_EQ(tokens[0].token_id, 17);
    EXPECT_EQ(tokens[1].token_id, 0);  // an end-of-sequence id, forced: it does not end the choice
    EXPECT_TRUE(tokens[2].token_id == 3 || tokens[2].token_id == 4 || tokens[2].token_id == 31) << tokens[2].token_id;
    EXPECT_EQ(tokens[3].token_id, 22);
    EXPECT_EQ(sink->reasons[choice], FinishReason::stop);
    // Logprobs are the raw model's, also for forced tokens.
    std::vector<TokenId> context = request.prompt_token_ids;
    for (const auto& token : tokens) {
      const auto logits = model->model.logits_for(context);
      const float max_logit = *std::max_element(logits.begin(), logits.end());
      double sum = 0.0;
      for (float x : logits) sum += std::exp(double(x) - max_logit);
      const double want = double(logits[std::size_t(token.token_id)]) - max_logit - std::log(sum);
      EXPECT_NEAR(token.logprob, want, 1e-4);
      ASSERT_EQ(token.top_logprobs.size(), 2u);
      EXPECT_EQ(token.top_logprobs[0].token_id, std::int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      context.push_back(token.token_id);
    }
  }
}

TEST(ConstrainedDecoding, TheBudgetIsTheTokensLeft) {
  const EngineOptions o = options();
  LocalEngine engine(o, std::make_unique<Runner>(o));
  GenerationRequest request;
  request.prompt_token_ids = {1, 2, 3};
  request.max_tokens = 2;  // shorter than the script: the choice ends by length
  request.sampling.temperature = 0.0f;
  auto constraint = std::make_shared<ScriptConstraint>(std::vector<TokenRule>{forced(7), forced(8), forced(9)});
  request.constraint = constraint;
  auto sink = std::make_shared<Sink>();
  ASSERT_FALSE(engine.submit(request, sink).rejected);
  ASSERT_EQ(sink->done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_EQ(sink->tokens[0].size(), 2u);
  EXPECT_EQ(sink->tokens[0][1].token_id, 8);
  EXPECT_EQ(sink->reasons[0], FinishReason::length);
  EXPECT_EQ(constraint->last_n_left, -1);  // the request's template is never used itself (choices clone it)
}

// A constraint that watches free text (strict tools under tool_choice auto): while it does not
// decide the end, an end-of-sequence id ends the choice (stop, the id reported) once min_tokens
// are written, and cannot be drawn before; while it does, the same id is only a token.
class WatchingConstraint final : public TokenConstraint {
 public:
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<WatchingConstraint>(*this); }
  TokenRule next(std::int32_t) override {
    if (n_accepted_ == 0) return forced(0);  // the constraint's own text: EOS is only a token
    return {};                               // free text
  }
  void accept(TokenId) override { ++n_accepted_; }
  bool finished() const override { return false; }
  bool decides_end() const override { return n_accepted_ == 0; }

 private:
  int n_accepted_ = 0;
};

TEST(ConstrainedDecoding, StopTokensEndTheChoiceWhereTheConstraintDoesNotDecide) {
  const EngineOptions o = options();
  LocalEngine engine(o, std::make_unique<Runner>(o));
  GenerationRequest request;
  request.prompt_token_ids = {1, 2, 3};
  request.max_tokens = 30;
  request.min_tokens = 3;
  request.sampling.temperature = 1.0f;
  request.sampling.seed = 11;
  request.sampling.logit_bias = {{0, 50.0f}};  // EOS whenever it may be drawn
  request.constraint = std::make_shared<WatchingConstraint>();
  auto sink = std::make_shared<Sink>();
  ASSERT_FALSE(engine.submit(request, sink).rejected);
  ASSERT_EQ(sink->done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const auto& tokens = sink->tokens[0];
  ASSERT_EQ(tokens.size(), 4u);
  EXPECT_EQ(tokens[0].token_id, 0);  // forced while the constraint decides: the choice goes on
  EXPECT_NE(tokens[1].token_id, 0);  // before min_tokens EOS cannot be drawn
  EXPECT_NE(tokens[2].token_id, 0);
  EXPECT_EQ(tokens[3].token_id, 0);  // after min_tokens, EOS ends it
  EXPECT_EQ(sink->reasons[0], FinishReason::stop);
}

TEST(ConstrainedSampling, MasksAndForces) {
  std::vector<float> logits(kVocab, 0.0f);
  logits[9] = 10.0f;  // the favourite, never allowed below
  helios::SamplingParams params;
  params.seed = 5;
  std::map<TokenId, int> counts;
  for (std::uint64_t i = 0; i < 400; ++i) {
    const auto sampled = sample_constrained(allowed({2, 3, 4}), logits, params, {}, i);
    ++counts[sampled.token];
    EXPECT_NEAR(sampled.logprob, -10.0 - std::log(39.0 * std::exp(-10.0) + 1.0), 1e-4);
  }
  EXPECT_EQ(counts.size(), 3u);
  for (const auto& [token, count] : counts) EXPECT_GT(count, 80) << token;  // uniform over the three
  params.temperature = 0.0f;
  EXPECT_EQ(sample_constrained(forced(1), logits, params, {}, 0).token, 1);
  EXPECT_EQ(sample_constrained(allowed({30, 9}), logits, params, {}, 0).token, 9);
  EXPECT_EQ(sample_constrained({}, logits, params, {}, 0).token, 9);  // any
  EXPECT_THROW(sample_constrained(forced(kVocab), logits, params, {}, 0), Error);
  EXPECT_THROW(sample_constrained(allowed({}), logits, params, {}, 0), Error);
}

}  // namespace
}  // namespace flare::engine
