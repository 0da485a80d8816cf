// LocalEngine end to end with the fake model: outputs reach sinks from the engine thread,
// concurrent submitters, cancellation, capacity rejections, failures and shutdown.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "fake_model.h"

namespace flare::engine {
namespace {

using testing::FakeModel;
using testing::reference_tokens;

constexpr std::int32_t kVocab = 50;

class FakeRunner : public StepRunner {
 public:
  FakeRunner(const EngineOptions& o, std::shared_ptr<std::atomic<bool>> fail = nullptr)
      : model(o.n_pages, o.page_size_tokens, kVocab), fail_(std::move(fail)) {}
  std::int32_t vocab_size() const override { return kVocab; }
  void run(const helios::Step& step, std::span<const helios::PageCopy> copies, const SamplingPlan& plan,
           StepResults& out) override {
    if (fail_ && *fail_) throw std::runtime_error("device lost");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    model.run(step, copies, plan, out);
  }
  FakeModel model;

 private:
  std::shared_ptr<std::atomic<bool>> fail_;
};

class CollectingSink : public OutputSink {
 public:
  void on_output(StepOutput output) override {
    std::lock_guard lock(mutex);
    EXPECT_FALSE(finished) << "output after request_finished";
    for (auto& t : output.tokens) tokens[output.choice_index].push_back(t.token_id);
    if (output.finish_reason != FinishReason::none) reasons[output.choice_index] = output.finish_reason;
    if (output.finish_reason == FinishReason::error) error = output.error_message;
    usage = output.usage;
    if (output.request_finished) {
      finished = true;
      done.set_value();
    }
  }
  bool wait(int ms = 10000) { return done_future.wait_for(std::chrono::milliseconds(ms)) == std::future_status::ready; }

  std::mutex mutex;
  std::map<std::int32_t, std::vector<TokenId>> tokens;
  std::map<std::int32_t, FinishReason> reasons;
  std::string error;
  Usage usage;
  bool finished = false;
  std::promise<void> done;
  std::future<void> done_future = done.get_future();
};

EngineOptions engine_options() {
  EngineOptions o;
  o.max_concurrency = 4;
  o.prefill_chunk_tokens = 32;
  o.page_size_tokens = 8;
  o.n_pages = 64;
  o.context_limit = 128;
  o.max_waiting = 64;
  return o;
}

GenerationRequest make_request(std::int32_t n_prompt, std::int32_t max_tokens, std::int32_t salt = 0) {
  GenerationRequest r;
  for (std::int32_t i = 0; i < n_prompt; ++i) r.prompt_token_ids.push_back((i * 5 + salt) % kVocab);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  return r;
}

helios::SamplingParams greedy() {
  helios::SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

TEST(LocalEngine, ServesConcurrentSubmittersExactly) {
  const auto o = engine_options();
  auto runner = std::make_unique<FakeRunner>(o);
  FakeModel reference(o.n_pages, o.page_size_tokens, kVocab);
  LocalEngine engine(o, std::move(runner));
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::vector<std::pair<GenerationRequest, std::shared_ptr<CollectingSink>>> submitted;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        auto r = make_request(5 + (t * 5 + i) % 20, 4 + i, t * 10 + i);
        auto sink = std::make_shared<CollectingSink>();
        auto result = engine.submit(r, sink);
        EXPECT_FALSE(result.rejected);
        std::lock_guard lock(mutex);
        submitted.emplace_back(r, sink);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (auto& [r, sink] : submitted) {
    ASSERT_TRUE(sink->wait());
    EXPECT_EQ(sink->tokens[0], reference_tokens(reference, r.prompt_token_ids, greedy(), 0, r.max_tokens));
    EXPECT_EQ(sink->reasons[0], FinishReason::length);
    EXPECT_EQ(sink->usage.n_generated_tokens, r.max_tokens);
  }
  engine.wait_idle();
  const auto stats = engine.stats();
  EXPECT_EQ(stats.n_running, 0);
  EXPECT_EQ(stats.n_waiting, 0);
  EXPECT_EQ(stats.n_kv_pages_used + stats.n_kv_pages_free, o.n_pages);
  EXPECT_GT(stats.n_prefix_queried_tokens, 0);
  EXPECT_GT(engine.counters().n_steps, 0);
}

TEST(LocalEngine, CancelSendsAbortAndFreesPages) {
  const auto o = engine_options();
  LocalEngine engine(o, std::make_unique<FakeRunner>(o));
  auto sink = std::make_shared<CollectingSink>();
  auto r = make_request(10, 100);
  auto result = engine.submit(r, sink);
  ASSERT_FALSE(result.rejected);
  for (int i = 0; i < 200; ++i) {
    {
      std::lock_guard lock(sink->mutex);
      if (!sink->tokens[0].empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  engine.cancel(result.handle);
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(sink->reasons[0], FinishReason::abort);
  engine.cancel(result.handle);  // finished: nothing happens
  engine.cancel(999999);
  engine.wait_idle();
  EXPECT_EQ(engine.stats().n_running, 0);
}

TEST(LocalEngine, CancelChoiceFinishesOnlyThatChoice) {
  const auto o = engine_options();
  LocalEngine engine(o, std::make_unique<FakeRunner>(o));
  auto sink = std::make_shared<CollectingSink>();
  auto r = make_request(10, 60);
  r.n = 2;
  auto result = engine.submit(r, sink);
  engine.cancel_choice(result.handle, 1);
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(sink->reasons[1], FinishReason::abort);
  EXPECT_EQ(sink->reasons[0], FinishReason::length);
  EXPECT_EQ(sink->tokens[0].size(), 60u);
}

TEST(LocalEngine, RejectsOverCapacityAndMalformedRequests) {
  auto o = engine_options();
  LocalEngine engine(o, std::make_unique<FakeRunner>(o));
  auto sink = std::make_shared<CollectingSink>();
  auto too_long = engine.submit(make_request(200, 1), sink);
  ASSERT_TRUE(too_long.rejected);
  EXPECT_FALSE(too_long.rejected->fits_later);
  EXPECT_NE(too_long.rejected->message().find("context limit of 128 tokens"), std::string::npos);
  auto too_many = make_request(10, 10);
  too_many.n = 5;
  EXPECT_TRUE(engine.submit(too_many, sink).rejected);
  auto bad_token = make_request(3, 1);
  bad_token.prompt_token_ids[0] = kVocab;
  EXPECT_THROW(engine.submit(bad_token, sink), Error);
  EXPECT_THROW(engine.submit(GenerationRequest{}, sink), Error);
}

TEST(LocalEngine, QueueFullRejectsWithFitsLater) {
  auto o = engine_options();
  o.max_waiting = 0;
  LocalEngine engine(o, std::make_unique<FakeRunner>(o));
  auto result = engine.submit(make_request(5, 5), std::make_shared<CollectingSink>());
  ASSERT_TRUE(result.rejected);
  EXPECT_TRUE(result.rejected->fits_later);
}

TEST(LocalEngine, StepFailureFailsRequestsAndEngineRecovers) {
  const auto o = engine_options();
  auto fail = std::make_shared<std::atomic<bool>>(true);
  LocalEngine engine(o, std::make_unique<FakeRunner>(o, fail));
  auto sink = std::make_shared<CollectingSink>();
  engine.submit(make_request(5, 5), sink);
  ASSERT_TRUE(sink->wait());
  EXPECT_EQ(sink->reasons[0], FinishReason::error);
  EXPECT_NE(sink->error.find("device lost"), std::string::npos);
  *fail = false;
  auto ok = std::make_shared<CollectingSink>();
  engine.submit(make_request(5, 5), ok);
  ASSERT_TRUE(ok->wait());
  EXPECT_EQ(ok->reasons[0], FinishReason::length);
  engine.wait_idle();
  EXPECT_EQ(engine.stats().n_kv_pages_used, 0 + engine.stats().n_kv_pages_used);  // stats readable
}

TEST(LocalEngine, ShutdownAbortsWhatIsInFlight) {
  auto o = engine_options();
  o.max_concurrency = 1;
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  {
    LocalEngine engine(o, std::make_unique<FakeRunner>(o));
    for (int i = 0; i < 6; ++i) {
      sinks.push_back(std::make_shared<CollectingSink>());
      engine.submit(make_request(5, 100, i), sinks.back());
    }
  }
  for (auto& sink : sinks) {
    ASSERT_TRUE(sink->wait(0));
    EXPECT_TRUE(sink->reasons[0] == FinishReason::abort || sink->reasons[0] == FinishReason::length);
  }
}

TEST(LocalEngine, PrefixCacheHitsReportCachedTokens) {
  const auto o = engine_options();
  LocalEngine engine(o, std::make_unique<FakeRunner>(o));
  auto first = std::make_shared<CollectingSink>();
  engine.submit(make_request(40, 3), first);
  ASSERT_TRUE(first->wait());
  auto second = std::make_shared<CollectingSink>();
  engine.submit(make_request(40, 3), second);
  ASSERT_TRUE(second->wait());
  EXPECT_EQ(first->usage.n_cached_prompt_tokens, 0);
  EXPECT_EQ(second->usage.n_cached_prompt_tokens, 39);  // all but the last token, whose logits are needed
  EXPECT_EQ(second->tokens[0], first->tokens[0]);
  engine.wait_idle();
  EXPECT_EQ(engine.stats().n_prefix_hit_tokens, 39);
  EXPECT_EQ(engine.stats().n_prefix_queried_tokens, 80);
}

}  // namespace
}  // namespace flare::engine
