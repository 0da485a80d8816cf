// Finds a fixed string (a tool call's opener, "<tool_call>" or "to=functions.") in generated text,
// token by token, so that a constraint can take over exactly where a call begins. A token that
// would complete the opener strictly inside itself (its bytes run past the opener's end) would
// leave the call's start half-written by free text; such tokens are masked out while a partial
// match is open, so the opener always ends at a token boundary. Built once per vocabulary and
// opener (a pass over the vocabulary per opener byte) and shared; immutable, so any thread reads it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/frontend.h"

namespace flare::server {

class OpenerWatch {
 public:
  OpenerWatch(std::string opener, const TokenVocabulary& vocabulary);

  // A state is the length of the opener's longest prefix that the text ends with (0 .. size-1).
  struct Step {
    std::uint32_t state = 0;
    bool opened = false;  // the opener ends exactly at the end of the bytes
  };
  Step advance(std::uint32_t state, std::string_view bytes) const;

  // The tokens allowed in `state` (every token but those completing the opener inside
  // themselves); null when every token is.
  const std::shared_ptr<const std::vector<std::uint64_t>>& allowed(std::uint32_t state) const { return allowed_[state]; }
  const std::string& opener() const { return opener_; }

 private:
  std::uint32_t next_state(std::uint32_t state, char c) const;

  std::string opener_;
  std::vector<std::uint32_t> fallback_;  // [size] KMP: the state after a mismatch at each length
  std::vector<std::shared_ptr<const std::vector<std::uint64_t>>> allowed_;  // [size] bit t: token t
};

// The watch for `opener` over the vocabulary, built on first use and cached while the vocabulary lives.
std::shared_ptr<const OpenerWatch> opener_watch_for(const std::shared_ptr<const TokenVocabulary>& vocabulary,
                                                    const std::string& opener);

}  // namespace flare::server
