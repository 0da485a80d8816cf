// Compiled constraints, kept for reuse: a request that repeats a schema (every call of an agent,
// every tool call of one tool) skips compilation and finds its token masks already cached in the
// TokenMasker. Keyed by ConstraintSpec::cache_key() and the vocabulary; least recently used
// entries leave when the cache holds more than max_entries grammars or max_elements grammar
// elements in all. Compile errors are not cached (a hostile input fails fast each time).
// Threads: shared by the HTTP threads; one lock, never held while compiling.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/constraint_spec.h"
#include "grammar/token_masker.h"

namespace flare::grammar {

class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const VocabularyTrie> trie, std::size_t max_entries = 64,
               std::size_t max_elements = std::size_t{1} << 21);

  // The masker of spec's grammar, compiled now or found. Throws GrammarError.
  std::shared_ptr<const TokenMasker> get(const ConstraintSpec& spec);

  const std::shared_ptr<const VocabularyTrie>& trie() const { return trie_; }
  struct Stats {
    std::uint64_t hits = 0;
    std::uint64_t compiles = 0;
    std::size_t entries = 0;
    std::size_t elements = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const TokenMasker> masker;
    std::size_t elements = 0;
  };
  std::shared_ptr<const VocabularyTrie> trie_;
  std::size_t max_entries_;
  std::size_t max_elements_;
  mutable std::mutex mutex_;
  std::list<Entry> order_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  Stats stats_;
};

}  // namespace flare::grammar
