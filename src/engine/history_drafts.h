// History drafts (prompt lookup): a model-free draft source for speculative decoding. The last
// n tokens of a choice's sequence (prompt + generated) are looked up among its earlier n-grams,
// longest n first; the tokens that followed the most recent earlier occurrence are the draft.
// Code editing, retrieval answers and agents that quote their inputs repeat long spans, which is
// where such drafts are accepted. The index grows with the sequence (amortised O(n_max) work per
// token), so a proposal costs a few hash lookups however long the context. One per choice, on
// the engine thread.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace flare::engine {

struct HistoryDraftSettings {
  std::int32_t min_ngram = 2;  // shortest suffix that may match
  std::int32_t max_ngram = 8;  // longest suffix looked up (tried first)
  // A match of n tokens drafts at most draft_per_ngram * n tokens: short matches are weaker
  // evidence, so they draft less.
  std::int32_t draft_per_ngram = 2;
};

class HistoryDrafts {
 public:
  explicit HistoryDrafts(HistoryDraftSettings settings = {});

  // Appends to `out` up to max_tokens tokens predicted to follow the sequence prompt ++ output
  // (which must extend the one of the previous call; a shorter one resets the index). Returns the
  // length of the matched suffix (0: no match, nothing appended).
  std::int32_t propose(std::span<const std::int32_t> prompt, std::span<const std::int32_t> output,
                       std::int32_t max_tokens, std::vector<std::int32_t>& out);

 private:
  std::int32_t token_at(std::int32_t position) const;
  std::uint64_t key(std::int32_t end, std::int32_t n) const;  // the n-gram ending at `end`
  bool same_ngram(std::int32_t end_a, std::int32_t end_b, std::int32_t n) const;

  HistoryDraftSettings settings_;
  std::span<const std::int32_t> prompt_;  // the current call's sequence
  std::span<const std::int32_t> output_;
  std::int32_t n_indexed_ = 0;  // n-grams ending before this position are in the index
  std::unordered_map<std::uint64_t, std::int32_t> last_end_;  // key(end, n) -> latest such end
};

}  // namespace flare::engine
