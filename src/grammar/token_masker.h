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
#include <list>
#include <memory>
#include <mutex>
#include <string>
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
};

class TokenMasker {
 public:
  // end_tokens: allowed where the grammar's text may end (EOS and the request's stop tokens).
  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const VocabularyTrie> trie,
              std::vector<TokenId> end_tokens, std::size_t max_cached_masks = 2048);

  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }
  const VocabularyTrie& trie() const { return *trie_; }
  const std::vector<TokenId>& end_tokens() const { return end_tokens_; }

  // The tokens allowed in `matcher`'s current state (cached). May grow the matcher's node pool.
  std::shared_ptr<const TokenMask> mask(Matcher& matcher) const;
  // The same, computed afresh (benchmarks; tests compare it with brute force).
  TokenMask compute(Matcher& matcher) const;

  struct Stats {
    std::uint64_t hits = 0;
    std::uint64_t misses = 0;
  };
  Stats stats() const;

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const VocabularyTrie> trie_;
  std::vector<TokenId> end_tokens_;
  std::size_t max_cached_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::shared_ptr<const TokenMask>> cache_;
  mutable Stats stats_;
};

}  // namespace flare::grammar
