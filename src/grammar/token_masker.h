// Token masks for grammar-constrained decoding: which tokens of the vocabulary may come next in
// a Matcher's state. A VocabularyTrie holds every token's bytes once, shared by all grammars of a
// model; a TokenMasker walks it depth first from a state, stepping the matcher one byte per trie
// edge and skipping a whole subtree the moment the grammar rejects its prefix, so a state that
// allows few bytes costs little. Masks are cached per grammar by the state's key: states repeat
// (inside a long string, at each element of an array) and across requests with one schema.
//
// Threads: a TokenMasker is shared by the requests of one grammar (engine thread and HTTP
// threads); its cache takes a lock. The trie is immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"

namespace flare::grammar {

using TokenId = std::int32_t;
using TokenMask = std::vector<std::uint64_t>;  // bit t: token t allowed

inline bool mask_test(const TokenMask& mask, TokenId t) { return (mask[std::size_t(t) >> 6] >> (t & 63)) & 1; }
inline void mask_set(TokenMask& mask, TokenId t) { mask[std::size_t(t) >> 6] |= std::uint64_t{1} << (t & 63); }

class VocabularyTrie {
 public:
  // bytes[t]: what token t writes; tokens with `excluded[t]` (control tokens) or no bytes are
  // never matched against a grammar.
  VocabularyTrie(const std::vector<std::string>& bytes, const std::vector<std::uint8_t>& excluded);

  std::size_t vocab_size() const { return vocab_size_; }
  // What token t writes ("" for ids outside the vocabulary).
  std::string_view token_bytes(TokenId t) const {
    return t >= 0 && std::size_t(t) < token_bytes_.size() ? std::string_view(token_bytes_[std::size_t(t)]) : std::string_view();
  }
  bool excluded(TokenId t) const { return t < 0 || std::size_t(t) >= excluded_.size() || excluded_[std::size_t(t)]; }
  std::size_t n_nodes() const { return byte_.size(); }
  std::size_t max_depth() const { return max_depth_; }

  // Nodes in depth-first order; node i is reached by byte_[i] from its parent at depth_[i] - 1,
  // its subtree ends before subtree_end_[i], and tokens [token_begin_[i], token_begin_[i + 1])
  // of tokens_ write exactly the bytes of its path.
  std::vector<std::uint8_t> byte_;
  std::vector<std::uint16_t> depth_;
  std::vector<std::uint32_t> subtree_end_;
  std::vector<std::uint32_t> token_begin_;
  std::vector<TokenId> tokens_;

 private:
  std::size_t vocab_size_ = 0;
  std::size_t max_depth_ = 0;
  std::vector<std::string> token_bytes_;
  std::vector<std::uint8_t> excluded_;  // [vocab_size] never matched: control tokens, empty ones
};

// The tokens a state allows, and the most bytes a match still needs after any one of them (what
// decides whether the token budget forces a closing; Grammar::kFarCost when out of reach).
struct StateMask {
  TokenMask bits;
  std::uint32_t max_cost_after = 0;
  std::size_t n_allowed = 0;
};

class TokenMasker {
 public:
  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabularyTrie> trie,
              std::size_t max_cache_bytes = std::size_t{8} << 20);

  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }
  const VocabularyTrie& trie() const { return *trie_; }

  // The tokens allowed in `matcher`'s current state (cached by state key). Grows the matcher's
  // node pool. End-of-text tokens are the caller's (allowed where matcher.can_end()).
  std::shared_ptr<const StateMask> mask(Matcher& matcher) const;
  // The same, computed afresh; with `max_cost_after`, only tokens after which a match needs at
  // most that many bytes more (closing within a budget, one byte per token).
  StateMask compute(Matcher& matcher, std::uint32_t max_cost_after = Grammar::kFarCost) const;

  struct Stats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
  };
  Stats stats() const;

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const VocabularyTrie> trie_;
  std::size_t max_cached_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::shared_ptr<const StateMask>> cache_;
  mutable Stats stats_;
};

}  // namespace flare::grammar
