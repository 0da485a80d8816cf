// The scheduler with a sliding-window history group (EngineOptions::kv_groups): its pool holds a
// few pages per sequence, its sequences give back the pages the window has left behind, and what
// every row's window reads is in its pages. A shadow KV of each group records the token written at
// every slot, so a row's window in group 1 must hold the same tokens as group 0 there.
#include <gtest/gtest.h>

#include <map>

#include "helios/history.h"
#include "scheduler_harness.h"

namespace flare::engine::testing {
namespace {

constexpr std::int32_t kWindow = 8;

struct ShadowKv {
  std::map<std::int64_t, TokenId> slots;  // page * page_size + offset -> token written there
  void copy(const helios::PageCopy& c, std::int32_t page_size) {
    for (std::int32_t i = 0; i < page_size; ++i) {
      auto it = slots.find(std::int64_t(c.src_page) * page_size + i);
      if (it != slots.end()) slots[std::int64_t(c.dst_page) * page_size + i] = it->second;
    }
  }
};

EngineOptions windowed_options(std::int32_t window_pool_pages) {
  EngineOptions o = small_options();
  o.kv_groups = {{o.n_pages, 0}, {window_pool_pages, kWindow}};
  return o;
}

// Runs every request to the end, checking each step's window in group 1 against group 0, and
// returns the tokens by request.
std::map<RequestHandle, std::vector<TokenId>> run_checked(const EngineOptions& o,
                                                          const std::vector<GenerationRequest>& requests,
                                                          std::int32_t* max_window_pages_used,
                                                          std::int32_t* max_rows = nullptr,
                                                          std::int64_t* n_preemptions = nullptr,
                                                          std::int64_t* n_hit_tokens = nullptr) {
  Scheduler scheduler(o);
  FakeModel model(o.n_pages, o.page_size_tokens, kVocab);
  const std::int32_t page = o.page_size_tokens;
  const std::int32_t released = scheduler.pools().released_page_id(1);
  std::map<RequestHandle, std::vector<TokenId>> tokens;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    scheduler.add(RequestHandle(i + 1), requests[i], params_of(requests[i], 7), 0.0);
  }
  ShadowKv kv[2];
  double now = 0.0;
  for (int n = 0; n < 10000 && scheduler.has_work(); ++n) {
    StepPlan plan = scheduler.schedule(now += 1.0);
    EXPECT_FALSE(plan.empty());
    if (plan.empty()) break;
    const std::vector<std::int32_t> n_pages{o.n_pages, released + 1};
    helios::step_validate(plan.step, n_pages, page);
    EXPECT_EQ(plan.step.group_block_tables.size(), 1u);
    std::vector<helios::PageCopy> group0;
    for (const auto& c : plan.page_copies) {
      kv[c.group].copy(c, page);
      if (c.group == 0) group0.push_back(c);
    }
    std::int32_t t = 0;
    for (const helios::StepRow& row : plan.step.rows) {
      const auto table = [&](std::int32_t g, std::int32_t position) {
        return plan.step.table(g)[std::size_t(row.first_block + position / page)];
      };
      // What the row's first query reads of its past: the same tokens in both groups.
      for (std::int32_t p = std::max(0, row.start_position - kWindow + 1); p < row.start_position; ++p) {
        const std::int32_t page1 = table(1, p);
        EXPECT_NE(page1, released) << "position " << p << " of a row from " << row.start_position;
        const auto want = kv[0].slots.find(std::int64_t(table(0, p)) * page + p % page);
        const auto got = kv[1].slots.find(std::int64_t(page1) * page + p % page);
        EXPECT_NE(want, kv[0].slots.end());
        EXPECT_NE(got, kv[1].slots.end()) << "position " << p;
        if (want != kv[0].slots.end() && got != kv[1].slots.end()) {
          EXPECT_EQ(got->second, want->second) << "position " << p;
        }
      }
      for (std::int32_t i = 0; i < row.n_tokens; ++i) {
        const std::int32_t p = row.start_position + i;
        for (std::int32_t g = 0; g < 2; ++g) {
          kv[g].slots[std::int64_t(table(g, p)) * page + p % page] = plan.step.tokens[std::size_t(t + i)];
        }
      }
      t += row.n_tokens;
    }
    if (max_rows) *max_rows = std::max(*max_rows, plan.step.n_rows());
    if (max_window_pages_used) {
      *max_window_pages_used = std::max(*max_window_pages_used, scheduler.pools().pool(1).n_used());
    }
    const SamplingPlan sampling = scheduler.plan_sampling(plan, kVocab);
    StepResults results;
    model.run(plan.step, group0, sampling, results);
    for (auto& ro : scheduler.apply(plan, sampling, results, kVocab)) {
      for (auto& o : ro.outputs) {
        EXPECT_NE(o.finish_reason, FinishReason::error) << o.error_message;
        for (auto& token : o.tokens) tokens[ro.handle].push_back(token.token_id);
      }
    }
  }
  EXPECT_FALSE(scheduler.has_work());
  if (n_preemptions) *n_preemptions = scheduler.counters().n_preemptions;
  if (n_hit_tokens) *n_hit_tokens = scheduler.counters().n_prefix_hit_tokens;
  // Every page still held belongs to the prefix cache, in both groups.
  EXPECT_EQ(scheduler.pools().pool(0).n_used(), scheduler.prefix_cache().n_pages_exclusive(0));
  EXPECT_EQ(scheduler.pools().pool(1).n_used(), scheduler.prefix_cache().n_pages_exclusive(1));
  scheduler.prefix_cache().clear();
  EXPECT_EQ(scheduler.pools().pool(0).n_used(), 0);
  EXPECT_EQ(scheduler.pools().pool(1).n_used(), 0);
  return tokens;
}

TEST(SchedulerWindows, AWindowPoolFarSmallerThanTheSequencesServesThemWithTheSameTokens) {
  const EngineOptions plain = small_options();
  // A pool of the window's pages per slot (4 x 7 pages of 4 tokens) for four sequences of 140
  // tokens: each alone would hold 35 pages in a pool that keeps every page.
  const std::int32_t per_slot = helios::history_window_pages(kWindow, plain.prefill_chunk_tokens, plain.page_size_tokens);
  const EngineOptions windowed = windowed_options(plain.max_concurrency * per_slot);
  ASSERT_LT(windowed.kv_groups[1].n_pages, 140 / plain.page_size_tokens);
  std::vector<GenerationRequest> requests;
  for (std::int32_t i = 0; i < 4; ++i) requests.push_back(make_request(iota_prompt(40, i + 1), 100));
  requests.push_back(make_request(iota_prompt(40, 1), 20));  // a prefix hit on the first prompt
  std::int32_t max_used = 0, max_rows = 0;
  const auto got = run_checked(windowed, requests, &max_used, &max_rows);
  EXPECT_LE(max_used, plain.max_concurrency * per_slot);
  EXPECT_GT(max_used, 0);
  EXPECT_EQ(max_rows, plain.max_concurrency);  // all four ran side by side in the small pool

  Harness reference(plain);
  for (const auto& r : requests) reference.add(r);
  reference.run_all();
  for (const auto& [handle, tokens] : got) EXPECT_EQ(tokens, reference.tokens[handle][0]) << "request " << handle;
  EXPECT_EQ(got.size(), requests.size());
}

TEST(SchedulerWindows, ChoicesForkAndSampleWithinTheWindowPool) {
  const EngineOptions plain = small_options();
  const std::int32_t per_slot = helios::history_window_pages(kWindow, plain.prefill_chunk_tokens, plain.page_size_tokens);
  const EngineOptions windowed = windowed_options(plain.max_concurrency * per_slot);
  GenerationRequest forked = make_request(iota_prompt(30, 3), 50, 1.0f);
  forked.n = 3;
  forked.sampling.seed = 11;
  std::int32_t max_used = 0;
  const auto got = run_checked(windowed, {forked, make_request(iota_prompt(9, 5), 70)}, &max_used);
  EXPECT_LE(max_used, plain.max_concurrency * per_slot);
  EXPECT_EQ(got.at(1).size(), 3u * 50u);
  EXPECT_EQ(got.at(2).size(), 70u);
}

TEST(SchedulerWindows, ThePoolFlareRunSizesServesEverySlotWithoutPreemption) {
  EngineOptions o = small_options();
  const std::int32_t pages =
      helios::history_window_pool_pages(kWindow, o.max_concurrency, o.step_token_budget(), o.page_size_tokens);
  o.kv_groups = {{o.n_pages, 0}, {pages, kWindow}};
  // Long prompts prefill in chunks beside decoding rows; one request forks three choices.
  std::vector<GenerationRequest> requests;
  for (std::int32_t i = 0; i < 3; ++i) requests.push_back(make_request(iota_prompt(60 + 9 * i, i + 2), 40));
  GenerationRequest forked = make_request(iota_prompt(33, 9), 30, 1.0f);
  forked.n = 2;
  forked.sampling.seed = 5;
  requests.push_back(forked);
  std::int32_t max_used = 0, max_rows = 0;
  std::int64_t n_preemptions = -1;
  run_checked(o, requests, &max_used, &max_rows, &n_preemptions);
  EXPECT_EQ(n_preemptions, 0);
  EXPECT_EQ(max_rows, o.max_concurrency);
  EXPECT_LE(max_used, pages);
}

// Conversations whose turns hit the previous turn's checkpoint at every offset within a page,
// with a window pool: each turn's tokens as without windows or hits, and each turn but the first
// of a conversation reuses all of the previous one (the answer checkpoint holds its end's window).
TEST(SchedulerWindows, LaterTurnsHitPartialPagesWithTheSameTokens) {
  EngineOptions plain = small_options();
  plain.max_concurrency = 1;  // turns run in order, each after the one it repeats
  const std::int32_t per_slot = helios::history_window_pages(kWindow, plain.prefill_chunk_tokens, plain.page_size_tokens);
  EngineOptions windowed = plain;
  windowed.kv_groups = {{plain.n_pages, 0}, {2 * per_slot, kWindow}};
  // The turns' prompts from a reference run without a cache.
  EngineOptions uncached = plain;
  uncached.prefix_checkpoints_per_slot = 0;
  Harness reference(uncached);
  std::vector<GenerationRequest> requests;
  std::int64_t n_expected_hits = 0;
  for (std::int32_t n_prompt = 9; n_prompt < 13; ++n_prompt) {
    std::vector<TokenId> prompt = iota_prompt(n_prompt, n_prompt);
    for (int turn = 0; turn < 3; ++turn) {
      const GenerationRequest r = make_request(prompt, 5 + turn);
      const RequestHandle handle = reference.add(r);
      reference.run_all();
      requests.push_back(r);
      if (turn > 0) n_expected_hits += std::int64_t(prompt.size()) - 3;  // all but the new user turn and the last answer token
      prompt.insert(prompt.end(), reference.tokens[handle][0].begin(), reference.tokens[handle][0].end());
      for (TokenId t : iota_prompt(2, 50 + turn)) prompt.push_back(t);
    }
  }
  std::int32_t max_used = 0;
  std::int64_t n_hits = 0;
  const auto got = run_checked(windowed, requests, &max_used, nullptr, nullptr, &n_hits);
  ASSERT_EQ(got.size(), requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(got.at(RequestHandle(i + 1)), reference.tokens[RequestHandle(i + 1)][0]) << "request " << i;
  }
  EXPECT_EQ(n_hits, n_expected_hits);
  EXPECT_LE(max_used, 2 * per_slot);
}

}  // namespace
}  // namespace flare::engine::testing
