// GrammarCache (grammar_cache.h).
#include "grammar/grammar_cache.h"

namespace flare::grammar {

GrammarCache::GrammarCache(std::shared_ptr<const VocabularyTrie> trie, std::size_t max_entries, std::size_t max_elements)
    : trie_(std::move(trie)), max_entries_(max_entries), max_elements_(max_elements) {}

std::shared_ptr<const TokenMasker> GrammarCache::get(const ConstraintSpec& spec) {
  std::string key = spec.cache_key();
  {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      ++stats_.hits;
      return it->second->masker;
    }
  }
  auto grammar = std::make_shared<const Grammar>(compile_constraint(spec));
  const std::size_t elements = grammar->n_elements();
  auto masker = std::make_shared<const TokenMasker>(std::move(grammar), trie_);
  std::lock_guard lock(mutex_);
  ++stats_.compiles;
  if (auto it = index_.find(key); it != index_.end()) return it->second->masker;  // compiled twice at once
  order_.push_front(Entry{key, masker, elements});
  index_.emplace(std::move(key), order_.begin());
  stats_.elements += elements;
  while (order_.size() > 1 && (order_.size() > max_entries_ || stats_.elements > max_elements_)) {
    stats_.elements -= order_.back().elements;
    index_.erase(order_.back().key);
    order_.pop_back();
  }
  return masker;
}

GrammarCache::Stats GrammarCache::stats() const {
  std::lock_guard lock(mutex_);
  Stats s = stats_;
  s.entries = order_.size();
  return s;
}

}  // namespace flare::grammar
