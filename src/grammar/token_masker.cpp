// VocabularyTrie and TokenMasker (token_masker.h).
#include "grammar/token_masker.h"

#include <algorithm>
#include <numeric>

namespace flare::grammar {

VocabularyTrie::VocabularyTrie(const std::vector<std::string>& bytes, const std::vector<std::uint8_t>& excluded)
    : vocab_size_(bytes.size()), token_bytes_(bytes), excluded_(bytes.size(), 1) {
  std::vector<TokenId> order;
  for (std::size_t t = 0; t < bytes.size(); ++t) {
    if (!bytes[t].empty() && (t >= excluded.size() || !excluded[t])) {
      order.push_back(TokenId(t));
      excluded_[t] = 0;
    }
  }
  std::sort(order.begin(), order.end(), [&](TokenId a, TokenId b) { return bytes[std::size_t(a)] < bytes[std::size_t(b)]; });
  // Walk the sorted tokens keeping the open path; a node's subtree ends when the path leaves it.
  std::vector<std::uint32_t> path;  // node ids of the open path, path[d] at depth d + 1
  const std::string* previous = nullptr;
  std::vector<std::vector<TokenId>> node_tokens;
  for (TokenId t : order) {
    const std::string& s = bytes[std::size_t(t)];
    std::size_t common = 0;
    if (previous) {
      while (common < s.size() && common < previous->size() && s[common] == (*previous)[common]) ++common;
    }
    while (path.size() > common) {
      subtree_end_[path.back()] = std::uint32_t(byte_.size());
      path.pop_back();
    }
    for (std::size_t d = common; d < s.size(); ++d) {
      path.push_back(std::uint32_t(byte_.size()));
      byte_.push_back(std::uint8_t(s[d]));
      depth_.push_back(std::uint16_t(std::min<std::size_t>(d + 1, 0xFFFF)));
      subtree_end_.push_back(0);
      node_tokens.emplace_back();
    }
    node_tokens[path.back()].push_back(t);
    max_depth_ = std::max(max_depth_, s.size());
    previous = &s;
  }
  while (!path.empty()) {
    subtree_end_[path.back()] = std::uint32_t(byte_.size());
    path.pop_back();
  }
  token_begin_.reserve(byte_.size() + 1);
  for (const auto& list : node_tokens) {
    token_begin_.push_back(std::uint32_t(tokens_.size()));
    tokens_.insert(tokens_.end(), list.begin(), list.end());
  }
  token_begin_.push_back(std::uint32_t(tokens_.size()));
}

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabularyTrie> trie,
                         std::size_t max_cache_bytes)
    : grammar_(std::move(grammar)),
      trie_(std::move(trie)),
      max_cached_(std::max<std::size_t>(16, max_cache_bytes / (trie_->vocab_size() / 8 + 64))) {}

StateMask TokenMasker::compute(Matcher& matcher, std::uint32_t max_cost_after) const {
  const VocabularyTrie& trie = *trie_;
  StateMask out;
  out.bits.assign((trie.vocab_size() + 63) / 64, 0);
  const MatchState& start = matcher.state();
  if (start.leaves.empty()) return out;
  // ids[d]: the interned state after the first d bytes of the current trie path.
  thread_local std::vector<std::uint32_t> ids;
  if (ids.size() < trie.max_depth() + 1) ids.resize(trie.max_depth() + 1);
  ids[0] = matcher.intern_state(start);
  const bool bounded = max_cost_after < Grammar::kFarCost;
  const std::size_t n = trie.n_nodes();
  for (std::size_t i = 0; i < n;) {
    const std::size_t d = trie.depth_[i];
    const std::uint32_t from = ids[d - 1];
    if (matcher.interned(from).leaves.empty()) {  // the prefix completed the text: nothing may extend it
      i = trie.subtree_end_[i];
      continue;
    }
    const std::uint32_t to = matcher.transition(from, trie.byte_[i]);
    if (to == Matcher::kDeadState) {
      i = trie.subtree_end_[i];
      continue;
    }
    ids[d] = to;
    const auto first = trie.token_begin_[i], last = trie.token_begin_[i + 1];
    if (first != last) {
      const std::uint32_t cost = matcher.interned_cost(to);
      if (!bounded || cost <= max_cost_after) {
        for (auto k = first; k < last; ++k) mask_set(out.bits, trie.tokens_[k]);
        out.n_allowed += last - first;
        out.max_cost_after = std::max(out.max_cost_after, cost);
      }
    }
    ++i;
  }
  return out;
}

std::shared_ptr<const StateMask> TokenMasker::mask(Matcher& matcher) const {
  std::string key = matcher.state_key(matcher.state());
  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      ++stats_.hits;
      return it->second;
    }
    ++stats_.misses;
  }
  auto computed = std::make_shared<const StateMask>(compute(matcher));
  std::lock_guard lock(mutex_);
  // A simple bound: when full, start over (masks are recomputed on demand; hot states return first).
  if (cache_.size() >= max_cached_) cache_.clear();
  cache_.emplace(std::move(key), computed);
  return computed;
}

TokenMasker::Stats TokenMasker::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace flare::grammar
