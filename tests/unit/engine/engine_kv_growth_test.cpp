// LocalEngine over a runner whose KV pages are backed on demand: the pool grows through the
// runner on the engine thread, the stats report what is backed, and when the device refuses more a
// request that cannot fit ends with a capacity error at its sink while the engine keeps serving.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "fake_model.h"

namespace flare::engine {
namespace {

using testing::FakeModel;
using testing::reference_tokens;

constexpr std::int32_t kVocab = 50;

// Backs pages in chunks of 4 up to `limit`, as ModelStepRunner over a VMM reservation does.
class GrowingRunner : public StepRunner {
 public:
  GrowingRunner(const EngineOptions& o, std::int32_t backed, std::int32_t limit)
      : model(o.n_pages, o.page_size_tokens, kVocab), backed_(backed), limit_(limit) {}
  std::int32_t vocab_size() const override { return kVocab; }
  void bind_thread() override { engine_thread = std::this_thread::get_id(); }
  void run(const helios::Step& step, std::span<const helios::PageCopy> copies, const SamplingPlan& plan,
           StepResults& out) override {
    for (auto page : step.block_tables) EXPECT_LT(page, backed_.load()) << "a page with no memory behind it";
    model.run(step, copies, plan, out);
  }
  std::int32_t kv_backed_pages() const override { return backed_; }
  std::int32_t kv_grow(std::int32_t wanted) override {
    EXPECT_EQ(std::this_thread::get_id(), engine_thread);
    backed_ = std::max(backed_.load(), std::min((wanted + 3) / 4 * 4, limit_));
    ++n_grows;
    return backed_;
  }

  FakeModel model;
  std::thread::id engine_thread;
  std::atomic<int> n_grows{0};

 private:
  std::atomic<std::int32_t> backed_;
  std::int32_t limit_;
};

class Sink : public OutputSink {
 public:
  void on_output(StepOutput output) override {
    std::lock_guard lock(mutex);
    for (auto& t : output.tokens) tokens.push_back(t.token_id);
    if (output.finish_reason != FinishReason::none) reason = output.finish_reason;
    if (output.finish_reason == FinishReason::error) error = output.error_message;
    if (output.request_finished) done.set_value();
  }
  bool wait() { return future.wait_for(std::chrono::seconds(10)) == std::future_status::ready; }

  std::mutex mutex;
  std::vector<TokenId> tokens;
  FinishReason reason = FinishReason::none;
  std::string error;
  std::promise<void> done;
  std::future<void> future = done.get_future();
};

EngineOptions options() {
  EngineOptions o;
  o.max_concurrency = 4;
  o.prefill_chunk_tokens = 32;
  o.page_size_tokens = 8;
  o.n_pages = 64;
  o.context_limit = 128;
  return o;
}

GenerationRequest request(std::int32_t n_prompt, std::int32_t max_tokens, std::int32_t salt) {
  GenerationRequest r;
  for (std::int32_t i = 0; i < n_prompt; ++i) r.prompt_token_ids.push_back((i * 3 + salt) % kVocab);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  return r;
}

helios::SamplingParams greedy() {
  helios::SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

TEST(EngineKvGrowth, GrowsOnTheEngineThreadAndReportsWhatIsBacked) {
  const auto o = options();
  auto owned = std::make_unique<GrowingRunner>(o, 4, 1 << 20);
  GrowingRunner* runner = owned.get();
  FakeModel reference(o.n_pages, o.page_size_tokens, kVocab);
  LocalEngine engine(o, std::move(owned));
  EXPECT_EQ(engine.stats().n_kv_pages_backed, 4);
  EXPECT_EQ(engine.stats().n_kv_pages_free, 64);  // every page may still be had
  std::vector<std::pair<GenerationRequest, std::shared_ptr<Sink>>> sent;
  for (std::int32_t i = 0; i < 6; ++i) {
    auto r = request(20 + i, 16, i);
    auto sink = std::make_shared<Sink>();
    ASSERT_FALSE(engine.submit(r, sink).rejected);
    sent.emplace_back(r, sink);
  }
  for (auto& [r, sink] : sent) {
    ASSERT_TRUE(sink->wait());
    EXPECT_EQ(sink->tokens, reference_tokens(reference, r.prompt_token_ids, greedy(), 0, r.max_tokens));
  }
  engine.wait_idle();
  EXPECT_GT(runner->n_grows.load(), 0);
  const auto stats = engine.stats();
  EXPECT_GT(stats.n_kv_pages_backed, 4);
  EXPECT_EQ(stats.n_kv_pages_used + stats.n_kv_pages_free, o.n_pages);
}

TEST(EngineKvGrowth, ARefusedGrowthEndsAnUnfitRequestWithACapacityError) {
  const auto o = options();
  LocalEngine engine(o, std::make_unique<GrowingRunner>(o, 4, 4));  // 32 tokens of memory
  auto big = std::make_shared<Sink>(), small = std::make_shared<Sink>();
  ASSERT_FALSE(engine.submit(request(20, 40, 1), big).rejected);  // fits the reservation, not the memory
  ASSERT_TRUE(big->wait());
  EXPECT_EQ(big->reason, FinishReason::error);
  EXPECT_NE(big->error.find("of KV cache"), std::string::npos) << big->error;
  ASSERT_FALSE(engine.submit(request(6, 8, 2), small).rejected);
  ASSERT_TRUE(small->wait());
  EXPECT_EQ(small->reason, FinishReason::length);
  engine.wait_idle();
  const auto stats = engine.stats();
  EXPECT_EQ(stats.n_kv_pages_backed, 4);
  EXPECT_EQ(stats.n_kv_pages_used + stats.n_kv_pages_free, 4);  // the pool is what the device backed
}

}  // namespace
}  // namespace flare::engine
