// Opener matching over token bytes (opener_watch.h).
#include "server/opener_watch.h"

#include <map>
#include <mutex>
#include <utility>

namespace flare::server {

OpenerWatch::OpenerWatch(std::string opener, const TokenVocabulary& vocabulary) : opener_(std::move(opener)) {
  const std::size_t m = opener_.size();
  fallback_.assign(m, 0);
  for (std::size_t i = 1, k = 0; i < m; ++i) {  // the KMP failure function
    while (k > 0 && opener_[i] != opener_[k]) k = fallback_[k - 1];
    if (opener_[i] == opener_[k]) ++k;
    fallback_[i] = static_cast<std::uint32_t>(k);
  }
  const std::size_t n_tokens = vocabulary.bytes.size();
  allowed_.resize(m);
  for (std::uint32_t state = 0; state < m; ++state) {
    std::shared_ptr<std::vector<std::uint64_t>> mask;
    for (std::size_t t = 0; t < n_tokens; ++t) {
      const std::string& bytes = vocabulary.bytes[t];
      std::uint32_t s = state;
      bool straddles = false;
      for (std::size_t i = 0; i < bytes.size() && !straddles; ++i) {
        s = next_state(s, bytes[i]);
        if (s == m) {
          straddles = i + 1 < bytes.size();
          s = fallback_[m - 1];
        }
      }
      if (!straddles) continue;
      if (!mask) {
        mask = std::make_shared<std::vector<std::uint64_t>>((n_tokens + 63) / 64, ~std::uint64_t{0});
        if (const std::size_t tail = n_tokens % 64; tail != 0) mask->back() = (std::uint64_t{1} << tail) - 1;
      }
      (*mask)[t / 64] &= ~(std::uint64_t{1} << (t % 64));
    }
    allowed_[state] = std::move(mask);
  }
}

std::uint32_t OpenerWatch::next_state(std::uint32_t state, char c) const {
  while (state > 0 && opener_[state] != c) state = fallback_[state - 1];
  return opener_[state] == c ? state + 1 : 0;
}

OpenerWatch::Step OpenerWatch::advance(std::uint32_t state, std::string_view bytes) const {
  const auto m = static_cast<std::uint32_t>(opener_.size());
  Step step{state, false};
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    step.state = next_state(step.state, bytes[i]);
    if (step.state != m) continue;
    if (i + 1 == bytes.size()) return {0, true};
    step.state = fallback_[m - 1];  // completed inside a token (one the mask would have refused)
  }
  return step;
}

std::shared_ptr<const OpenerWatch> opener_watch_for(const std::shared_ptr<const TokenVocabulary>& vocabulary,
                                                    const std::string& opener) {
  // A server serves one model and its tool-call format has one opener: the map stays tiny.
  struct Entry {
    std::weak_ptr<const TokenVocabulary> vocabulary;
    std::shared_ptr<const OpenerWatch> watch;
  };
  static std::mutex mutex;
  static std::map<std::pair<const TokenVocabulary*, std::string>, Entry> watches;
  std::lock_guard lock(mutex);
  Entry& entry = watches[{vocabulary.get(), opener}];
  if (!entry.watch || entry.vocabulary.expired()) {
    entry.watch = std::make_shared<const OpenerWatch>(opener, *vocabulary);
    entry.vocabulary = vocabulary;
  }
  return entry.watch;
}

}  // namespace flare::server
