// The scheduler with prefix checkpoints that end mid-page (snapshots): multi-turn conversations
// hit all of the previous turn at every offset within a page, n > 1 choices fork after a partial
// hit, preemption recomputes around them, and a snapshot a live sequence would copy is dropped
// rather than preempting anyone when no page is free. The fake model reads every position back
// through the block tables, so tokens equal to the reference mean the pages held the right KV.
#include <gtest/gtest.h>

#include "scheduler_harness.h"

namespace flare::engine::testing {
namespace {

std::vector<TokenId> concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Three turns of a conversation whose first prompt has n_prompt tokens: each next prompt is the
// conversation so far plus `user` more tokens. Returns the cached tokens of each turn.
std::vector<std::int32_t> run_conversation(Harness& h, std::int32_t n_prompt, std::int32_t n_answer,
                                           std::int32_t n_user, std::int32_t salt) {
  std::vector<std::int32_t> cached;
  std::vector<TokenId> prompt = iota_prompt(n_prompt, salt);
  for (int turn = 0; turn < 3; ++turn) {
    const GenerationRequest r = make_request(prompt, n_answer);
    const RequestHandle handle = h.add(r);
    h.run_all();
    EXPECT_EQ(h.tokens[handle][0], reference_tokens(h.model, prompt, params_of(r, 7), 0, n_answer))
        << "prompt " << n_prompt << " turn " << turn;
    cached.push_back(h.last_usage[handle].n_cached_prompt_tokens);
    prompt = concat(prompt, h.tokens[handle][0]);
    prompt = concat(prompt, iota_prompt(n_user, salt + turn + 11));
  }
  return cached;
}

TEST(SchedulerSnapshots, EveryLaterTurnHitsTheWholeConversationAtEveryOffsetWithinAPage) {
  Harness h(small_options());
  const std::int32_t page = h.options.page_size_tokens;
  std::set<std::int32_t> offsets;  // where within a page the hits ended
  for (std::int32_t n_prompt = 5; n_prompt <= 5 + 2 * page; ++n_prompt) {
    for (std::int32_t n_answer : {3, 6}) {
      const auto cached = run_conversation(h, n_prompt, n_answer, 2, 2 * n_prompt + (n_answer == 6 ? 1 : 0));
      EXPECT_EQ(cached[0], 0);
      // Turn t's prompt repeats turn t - 1's prompt and answer; all of it but the answer's last
      // token (never computed) is cached.
      std::int32_t previous = n_prompt;
      for (std::size_t t = 1; t < cached.size(); ++t) {
        EXPECT_EQ(cached[t], previous + n_answer - 1) << "prompt " << n_prompt << " answer " << n_answer << " turn " << t;
        offsets.insert(cached[t] % page);
        previous += n_answer + 2;
      }
    }
  }
  EXPECT_EQ(offsets.size(), std::size_t(page));
  EXPECT_LE(h.scheduler.prefix_cache().n_snapshots(), h.options.max_concurrency * h.options.prefix_snapshots_per_slot);
  h.expect_pages_returned();
}

TEST(SchedulerSnapshots, ARepeatedPromptHitsAllButItsLastTokenAtEveryLength) {
  Harness h(small_options());
  for (std::int32_t n = 5; n <= 13; ++n) {
    const GenerationRequest r = make_request(iota_prompt(n, n), 4);
    const RequestHandle a = h.add(r);
    h.run_all();
    const RequestHandle b = h.add(r);  // the prompt checkpoint, its snapshot page included
    h.run_all();
    EXPECT_EQ(h.last_usage[b].n_cached_prompt_tokens, n - 1) << n;
    EXPECT_EQ(h.tokens[b][0], h.tokens[a][0]);
  }
  h.expect_pages_returned();
}

TEST(SchedulerSnapshots, WithoutSnapshotSlotsHitsAreWholePages) {
  auto o = small_options();
  o.prefix_snapshots_per_slot = 0;
  Harness h(o);
  const auto cached = run_conversation(h, 7, 6, 2, 3);
  EXPECT_EQ(cached[1], (7 + 6 - 1) / 4 * 4);
  EXPECT_EQ(h.scheduler.prefix_cache().n_snapshots(), 0);
  h.expect_pages_returned();
}

TEST(SchedulerSnapshots, ChoicesForkAfterAPartialHit) {
  Harness h(small_options());
  const GenerationRequest first = make_request(iota_prompt(10, 4), 5);
  const RequestHandle a = h.add(first);
  h.run_all();
  for (std::int32_t extra = 0; extra < 4; ++extra) {  // the fork point at every offset of a page
    GenerationRequest next = make_request(concat(concat(first.prompt_token_ids, h.tokens[a][0]), iota_prompt(extra + 1, 30)),
                                          12, 0.9f);
    next.n = 3;
    next.sampling.seed = 17 + extra;
    const RequestHandle b = h.add(next);
    h.run_all();
    EXPECT_GE(h.last_usage[b].n_cached_prompt_tokens, 10 + 5 - 1) << extra;
    for (std::int32_t c = 0; c < 3; ++c) {
      EXPECT_EQ(h.tokens[b][c], reference_tokens(h.model, next.prompt_token_ids, params_of(next, 7), c, 12))
          << "extra " << extra << " choice " << c;
    }
  }
  h.expect_pages_returned();
}

TEST(SchedulerSnapshots, PreemptionAroundPartialHitsKeepsOutputsExact) {
  auto o = small_options();
  o.n_pages = 28;  // four conversations of up to 60 tokens at once do not fit
  Harness h(o);
  // First turns, one after another, leave snapshots; the second turns then run side by side.
  std::vector<GenerationRequest> seconds;
  for (std::int32_t i = 0; i < 4; ++i) {
    const GenerationRequest r = make_request(iota_prompt(9 + i, i + 1), 7);
    const RequestHandle handle = h.add(r);
    h.run_all();
    GenerationRequest second = make_request(concat(concat(r.prompt_token_ids, h.tokens[handle][0]), iota_prompt(3, 40 + i)),
                                            30, i % 2 ? 0.7f : 0.0f);
    second.n = i == 3 ? 2 : 1;
    seconds.push_back(second);
  }
  std::vector<RequestHandle> handles;
  for (const auto& r : seconds) handles.push_back(h.add(r));
  h.run_all();
  EXPECT_GT(h.scheduler.counters().n_preemptions, 0);
  for (std::size_t i = 0; i < seconds.size(); ++i) {
    for (std::int32_t c = 0; c < seconds[i].n; ++c) {
      EXPECT_EQ(h.tokens[handles[i]][c], reference_tokens(h.model, seconds[i].prompt_token_ids, params_of(seconds[i], 7), c, 30))
          << "request " << i << " choice " << c;
    }
  }
  h.expect_pages_returned();
}

// A pool of exactly one request's pages: after its prompt checkpoint, the decode row would copy the
// snapshot page and no page is free, so the snapshot goes (no preemption, no capacity error).
TEST(SchedulerSnapshots, ASnapshotIsDroppedWhenItsCopyFindsNoFreePage) {
  auto o = small_options();
  o.n_pages = 3;
  o.max_concurrency = 1;
  Harness h(o);
  const GenerationRequest r = make_request(iota_prompt(10, 2), 2);  // 12 tokens: three pages
  const RequestHandle handle = h.add(r);
  h.run_all();
  EXPECT_EQ(h.finish[handle][0], FinishReason::length);
  EXPECT_EQ(h.tokens[handle][0], reference_tokens(h.model, r.prompt_token_ids, params_of(r, 7), 0, 2));
  EXPECT_EQ(h.scheduler.counters().n_preemptions, 0);
  // Another request of the same shape still fits: the cache gives its pages back.
  const GenerationRequest other = make_request(iota_prompt(10, 5), 2);
  const RequestHandle second = h.add(other);
  h.run_all();
  EXPECT_EQ(h.tokens[second][0], reference_tokens(h.model, other.prompt_token_ids, params_of(other, 7), 0, 2));
  h.expect_pages_returned();
}

}  // namespace
}  // namespace flare::engine::testing
