// History drafts: the incremental n-gram index and the lookup (see history_drafts.h).
#include "engine/history_drafts.h"

#include <algorithm>

#include "common/error.h"
#include "engine/hash_mix.h"

namespace flare::engine {
HistoryDrafts::HistoryDrafts(HistoryDraftSettings settings) : settings_(settings) {
  if (settings_.min_ngram < 1 || settings_.max_ngram < settings_.min_ngram || settings_.draft_per_ngram < 1) {
    fail(ExitCode::failure, "internal: history draft n-grams {}..{} drafting {} per token", settings_.min_ngram,
         settings_.max_ngram, settings_.draft_per_ngram);
  }
}

std::int32_t HistoryDrafts::token_at(std::int32_t position) const {
  const auto n_prompt = std::int32_t(prompt_.size());
  return position < n_prompt ? prompt_[std::size_t(position)] : output_[std::size_t(position - n_prompt)];
}

std::uint64_t HistoryDrafts::key(std::int32_t end, std::int32_t n) const {
  std::uint64_t h = hash_mix64(std::uint64_t(n) * 0x9e3779b97f4a7c15ull);
  for (std::int32_t p = end - n + 1; p <= end; ++p) h = hash_mix64(h ^ std::uint64_t(std::uint32_t(token_at(p))));
  return h;
}

bool HistoryDrafts::same_ngram(std::int32_t end_a, std::int32_t end_b, std::int32_t n) const {
  for (std::int32_t i = 0; i < n; ++i) {
    if (token_at(end_a - i) != token_at(end_b - i)) return false;
  }
  return true;
}

std::int32_t HistoryDrafts::propose(std::span<const std::int32_t> prompt, std::span<const std::int32_t> output,
                                    std::int32_t max_tokens, std::vector<std::int32_t>& out) {
  prompt_ = prompt;
  output_ = output;
  const auto length = std::int32_t(prompt.size() + output.size());
  if (length < n_indexed_) {  // not an extension of the indexed sequence
    last_end_.clear();
    n_indexed_ = 0;
  }
  // Index every n-gram that ends before the last token, so a lookup of the suffix finds earlier
  // occurrences only.
  for (; n_indexed_ < length - 1; ++n_indexed_) {
    const std::int32_t end = n_indexed_;
    for (std::int32_t n = settings_.min_ngram; n <= std::min(settings_.max_ngram, end + 1); ++n) {
      last_end_[key(end, n)] = end;
    }
  }
  if (max_tokens <= 0 || length < 2) return 0;
  const std::int32_t last = length - 1;
  for (std::int32_t n = std::min(settings_.max_ngram, length - 1); n >= settings_.min_ngram; --n) {
    auto it = last_end_.find(key(last, n));
    if (it == last_end_.end() || !same_ngram(it->second, last, n)) continue;  // absent, or a hash collision
    const std::int32_t from = it->second + 1;
    const std::int32_t n_draft = std::min({max_tokens, settings_.draft_per_ngram * n, length - from});
    for (std::int32_t p = from; p < from + n_draft; ++p) out.push_back(token_at(p));
    return n;
  }
  return 0;
}

}  // namespace flare::engine
