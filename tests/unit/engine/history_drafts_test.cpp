// History drafts: the longest earlier n-gram wins, its most recent occurrence, drafts sized by the
// match, growth by appending, and a reset when the sequence is not an extension.
#include "engine/history_drafts.h"

#include <gtest/gtest.h>

#include <random>

namespace flare::engine {
namespace {

std::vector<std::int32_t> propose(HistoryDrafts& drafts, const std::vector<std::int32_t>& prompt,
                                  const std::vector<std::int32_t>& output, std::int32_t max_tokens,
                                  std::int32_t* matched = nullptr) {
  std::vector<std::int32_t> out;
  const std::int32_t n = drafts.propose(prompt, output, max_tokens, out);
  if (matched != nullptr) *matched = n;
  return out;
}

TEST(HistoryDrafts, CopiesWhatFollowedTheSuffixEarlier) {
  HistoryDrafts drafts;
  // "... 5 6 7 8 9 10 ..." then the output ends with "5 6 7": draft "8 9 10 ...".
  const std::vector<std::int32_t> prompt = {1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 4};
  std::int32_t matched = 0;
  EXPECT_EQ(propose(drafts, prompt, {5, 6, 7}, 4, &matched), (std::vector<std::int32_t>{8, 9, 10, 11}));
  EXPECT_EQ(matched, 3);
}

TEST(HistoryDrafts, NothingWithoutAnEarlierOccurrence) {
  HistoryDrafts drafts;
  std::int32_t matched = -1;
  EXPECT_TRUE(propose(drafts, {1, 2, 3, 4}, {5, 6}, 4, &matched).empty());
  EXPECT_EQ(matched, 0);
  EXPECT_TRUE(propose(drafts, {7}, {}, 4).empty());
  EXPECT_TRUE(propose(drafts, {}, {}, 4).empty());
  EXPECT_TRUE(propose(drafts, {1, 2, 1, 2}, {}, 0).empty());  // no room
}

TEST(HistoryDrafts, LongestMatchThenMostRecentOccurrence) {
  HistoryDrafts drafts;
  // Suffix "2 3": "2 3 -> 40" occurs twice (the later one wins) but "1 2 3 -> 50" is longer.
  const std::vector<std::int32_t> prompt = {1, 2, 3, 50, 9, 2, 3, 40, 9, 2, 3, 41, 8};
  EXPECT_EQ(propose(drafts, prompt, {1, 2, 3}, 1), (std::vector<std::int32_t>{50}));
  HistoryDrafts recent;
  EXPECT_EQ(propose(recent, prompt, {7, 2, 3}, 1), (std::vector<std::int32_t>{41}));
}

TEST(HistoryDrafts, ShortMatchesDraftLess) {
  HistoryDraftSettings settings;
  settings.min_ngram = 2;
  settings.draft_per_ngram = 2;
  HistoryDrafts drafts(settings);
  const std::vector<std::int32_t> prompt = {9, 8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::int32_t matched = 0;
  // Only "9 8" matches (2 tokens): at most 4 drafts although 8 were allowed.
  EXPECT_EQ(propose(drafts, prompt, {9, 8}, 8, &matched), (std::vector<std::int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(matched, 2);
}

TEST(HistoryDrafts, DraftsRunIntoTheSuffixOfAPeriodicSequence) {
  HistoryDrafts drafts;
  // "a b a b a b": the suffix "a b" last occurred two back; the draft continues the period.
  EXPECT_EQ(propose(drafts, {4, 5, 4, 5}, {4, 5}, 6), (std::vector<std::int32_t>{4, 5}));
}

TEST(HistoryDrafts, GrowsIncrementallyAndResetsOnAnotherSequence) {
  std::mt19937 rng(3);
  std::vector<std::int32_t> prompt;
  for (int i = 0; i < 200; ++i) prompt.push_back(std::int32_t(rng() % 5));
  HistoryDrafts incremental;
  std::vector<std::int32_t> output;
  for (int step = 0; step < 100; ++step) {
    output.push_back(std::int32_t(rng() % 5));
    HistoryDrafts fresh;
    EXPECT_EQ(propose(incremental, prompt, output, 5), propose(fresh, prompt, output, 5)) << "step " << step;
  }
  // A different, shorter sequence: the index starts over instead of matching stale n-grams.
  EXPECT_EQ(propose(incremental, {1, 2, 3, 1, 2}, {}, 3), (std::vector<std::int32_t>{3, 1, 2}));
}

}  // namespace
}  // namespace flare::engine
