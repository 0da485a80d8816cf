// VocabularyTrie and TokenMasker (token_masker.h).
#include "grammar/token_masker.h"

#include <algorithm>
#include <numeric>

namespace flare::grammar {

VocabularyTrie::VocabularyTrie(const std::vector<std::string>& bytes, const std::vector<std::uint8_t>& excluded)
    : vocab_size_(bytes.size()) {
  std::vector<TokenId> order;
  for (std::size_t t = 0; t < bytes.size(); ++t) {
    if (!bytes[t].empty() && (t >= excluded.size() || !excluded[t])) order.push_back(TokenId(t));
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
                         std::vector<TokenId> end_tokens, std::size_t max_cached_masks)
    : grammar_(std::move(grammar)), trie_(std::move(trie)), end_tokens_(std::move(end_tokens)), max_cached_(max_cached_masks) {}

TokenMask TokenMasker::compute(Matcher& matcher) const {
  const VocabularyTrie& trie = *trie_;
  TokenMask mask((trie.vocab_size() + 63) / 64, 0);
  const MatchState& start = matcher.state();
  if (start.accepting) {
    for (TokenId t : end_tokens_) {
      if (t >= 0 && std::size_t(t) < trie.vocab_size()) mask_set(mask, t);
    }
  }
  if (start.leaves.empty()) return mask;
  // states[d]: the state after the first d bytes of the current trie path.
  std::vector<MatchState> states(trie.max_depth() + 1);
  states[0] = start;
  const std::size_t n = trie.n_nodes();
  for (std::size_t i = 0; i < n;) {
    const std::size_t d = trie.depth_[i];
    const MatchState& from = states[d - 1];
    if (from.leaves.empty()) {  // the prefix completed the text: nothing may extend it
      i = trie.subtree_end_[i];
      continue;
    }
    matcher.step(from, trie.byte_[i], states[d]);
    if (states[d].dead()) {
      i = trie.subtree_end_[i];
      continue;
    }
    for (auto k = trie.token_begin_[i]; k < trie.token_begin_[i + 1]; ++k) mask_set(mask, trie.tokens_[k]);
    ++i;
  }
  return mask;
}

std::shared_ptr<const TokenMask> TokenMasker::mask(Matcher& matcher) const {
  std::string key = matcher.state_key(matcher.state());
  {
    std::lock_guard lock(mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) {
      ++stats_.hits;
      return it->second;
    }
    ++stats_.misses;
  }
  auto computed = std::make_shared<const TokenMask>(compute(matcher));
  std::lock_guard lock(mutex_);
  if (cache_.size() >= max_cached_) cache_.clear();  // a simple bound: masks are recomputed on demand
  cache_.emplace(std::move(key), computed);
  return computed;
}

TokenMasker::Stats TokenMasker::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace flare::grammar
