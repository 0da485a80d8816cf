// The scheduler over a KV pool backed on demand (PagePool::set_backing): pages grow as requests
// need them; when the device refuses more, requests that fit together queue and finish, and a
// request that cannot fit even alone ends with a capacity error instead of waiting forever.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "fake_model.h"

namespace flare::engine {
namespace {

using testing::FakeModel;
using testing::reference_tokens;

constexpr std::int32_t kVocab = 64;

EngineOptions options_of(std::int32_t n_pages) {
  EngineOptions o;
  o.max_concurrency = 4;
  o.prefill_chunk_tokens = 16;
  o.page_size_tokens = 4;
  o.n_pages = n_pages;
  o.context_limit = 256;
  o.eos_token_ids = {};
  return o;
}

GenerationRequest make_request(std::int32_t n_prompt, std::int32_t max_tokens, std::int32_t start = 1) {
  GenerationRequest r;
  for (std::int32_t i = 0; i < n_prompt; ++i) r.prompt_token_ids.push_back((start + i * 7) % kVocab);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0.0f;
  return r;
}

helios::SamplingParams params_of(std::uint64_t seed) {
  helios::SamplingParams p;
  p.temperature = 0.0f;
  p.seed = seed;
  return p;
}

// A device that backs pages in chunks up to a memory limit, as ModelStepRunner::kv_grow does.
struct FakeDevice {
  std::int32_t backed = 0;
  std::int32_t chunk = 4;
  std::int32_t limit = 1 << 30;
  std::int32_t n_refusals = 0;

  helios::PagePool::GrowHook hook() {
    return [this](std::int32_t wanted) {
      const std::int32_t rounded = (wanted + chunk - 1) / chunk * chunk;
      backed = std::max(backed, std::min(rounded, limit));
      if (backed < wanted) ++n_refusals;
      return backed;
    };
  }
};

struct Harness {
  Harness(EngineOptions o, FakeDevice d)
      : options(o), device(d), scheduler(o), model(o.n_pages, o.page_size_tokens, kVocab) {
    scheduler.set_kv_backing(device.backed, device.hook());
  }

  RequestHandle add(const GenerationRequest& r) {
    const RequestHandle h = next++;
    scheduler.add(h, r, params_of(7), now_ms);
    return h;
  }

  void record(std::vector<RequestOutputs> outs) {
    for (auto& ro : outs) {
      for (auto& o : ro.outputs) {
        for (auto& t : o.tokens) tokens[ro.handle].push_back(t.token_id);
        if (o.finish_reason != FinishReason::none) finish[ro.handle] = o.finish_reason;
        if (o.finish_reason == FinishReason::error) {
          errors[ro.handle] = o.error_message;
          if (o.capacity_error) capacity_errors.insert(ro.handle);
        }
      }
    }
  }

  bool step() {
    StepPlan plan = scheduler.schedule(now_ms);
    now_ms += 1.0;
    record(scheduler.take_capacity_failures());
    if (plan.empty()) return false;
    helios::step_validate(plan.step, options.n_pages, options.page_size_tokens);
    for (auto page : plan.step.block_tables) EXPECT_LT(page, scheduler.pool().n_backed()) << "an unbacked page";
    EXPECT_LE(scheduler.pool().n_backed(), device.backed);
    const SamplingPlan sampling = scheduler.plan_sampling(plan, kVocab);
    StepResults results;
    model.run(plan.step, plan.page_copies, sampling, results);
    record(scheduler.apply(plan, sampling, results, kVocab));
    return true;
  }

  void run_all() {
    for (int i = 0; i < 10000 && scheduler.has_work(); ++i) {
      if (!step() && scheduler.has_work()) FAIL() << "scheduler has work but scheduled nothing";
    }
    EXPECT_FALSE(scheduler.has_work());
  }

  std::vector<TokenId> reference(const GenerationRequest& r) {
    return reference_tokens(model, r.prompt_token_ids, params_of(7), 0, r.max_tokens);
  }

  EngineOptions options;
  FakeDevice device;
  Scheduler scheduler;
  FakeModel model;
  double now_ms = 0.0;
  RequestHandle next = 1;
  std::map<RequestHandle, std::vector<TokenId>> tokens;
  std::map<RequestHandle, FinishReason> finish;
  std::map<RequestHandle, std::string> errors;
  std::set<RequestHandle> capacity_errors;  // errors marked as the capacity error
};

TEST(SchedulerGrowth, PagesGrowAsRequestsNeedThem) {
  Harness h(options_of(64), FakeDevice{.backed = 4, .chunk = 4});
  std::vector<std::pair<RequestHandle, GenerationRequest>> requests;
  for (std::int32_t i = 0; i < 4; ++i) {
    const auto r = make_request(10 + 3 * i, 12, i + 2);
    requests.emplace_back(h.add(r), r);
  }
  h.run_all();
  for (const auto& [handle, r] : requests) {
    EXPECT_EQ(h.finish[handle], FinishReason::length);
    EXPECT_EQ(h.tokens[handle], h.reference(r));
  }
  EXPECT_GT(h.scheduler.pool().n_backed(), 4);  // it grew
  EXPECT_LT(h.scheduler.pool().n_backed(), 64);  // to what the requests needed, not to the whole reservation
  EXPECT_EQ(h.device.n_refusals, 0);
}

TEST(SchedulerGrowth, RequestsQueueWhenTheDeviceRefusesMore) {
  // 8 pages of memory; each request needs 7 (28 tokens) at most: they take turns.
  Harness h(options_of(64), FakeDevice{.backed = 4, .chunk = 4, .limit = 8});
  const auto a = make_request(12, 16, 3), b = make_request(12, 16, 5), c = make_request(12, 16, 9);
  const auto ha = h.add(a), hb = h.add(b), hc = h.add(c);
  h.run_all();
  EXPECT_GT(h.device.n_refusals, 0);
  EXPECT_EQ(h.scheduler.pool().n_backed(), 8);
  EXPECT_EQ(h.tokens[ha], h.reference(a));
  EXPECT_EQ(h.tokens[hb], h.reference(b));
  EXPECT_EQ(h.tokens[hc], h.reference(c));
  for (auto handle : {ha, hb, hc}) EXPECT_EQ(h.finish[handle], FinishReason::length);
  EXPECT_TRUE(h.errors.empty());
}

TEST(SchedulerGrowth, ARequestTheMemoryCannotHoldEndsWithACapacityError) {
  // 4 pages (16 tokens) of memory in a reservation of 64; growth is refused.
  Harness h(options_of(64), FakeDevice{.backed = 4, .chunk = 4, .limit = 4});
  const auto big = make_request(10, 20);  // 30 tokens: 8 pages, admitted against the reservation
  const auto hbig = h.add(big);
  h.run_all();
  EXPECT_EQ(h.finish[hbig], FinishReason::error);
  EXPECT_NE(h.errors[hbig].find("needs 32 tokens of KV cache (8 pages)"), std::string::npos) << h.errors[hbig];
  EXPECT_NE(h.errors[hbig].find("the device had no memory for more"), std::string::npos) << h.errors[hbig];
  EXPECT_EQ(h.capacity_errors, std::set<RequestHandle>{hbig});  // the server answers it as capacity
  EXPECT_LT(h.tokens[hbig].size(), 20u);

  // Now that growth is known to fail, a request that cannot fit is answered before it runs, and
  // one that fits still runs.
  const auto bigger = make_request(30, 8), small = make_request(5, 6, 4);
  const auto hbigger = h.add(bigger), hsmall = h.add(small);
  h.run_all();
  EXPECT_EQ(h.finish[hbigger], FinishReason::error);
  EXPECT_TRUE(h.tokens[hbigger].empty());
  EXPECT_EQ(h.finish[hsmall], FinishReason::length);
  EXPECT_EQ(h.tokens[hsmall], h.reference(small));
  EXPECT_EQ(h.scheduler.pool().n_used(), h.scheduler.prefix_cache().n_pages_exclusive());
}

}  // namespace
}  // namespace flare::engine
