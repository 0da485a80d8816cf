// One constrained text's walk through its grammar, token by token: which tokens may come next
// (the masker's cached mask for the state, narrowed when the token budget says the text must
// start closing), and the state after each accepted token. Closing assumes the worst: one byte
// per token (byte-level vocabularies have a token for every byte), so a text that must end
// within n tokens is allowed only tokens after which its shortest completion takes at most the
// tokens left.
// Threads: one cursor per choice, used by one thread at a time; copies are independent.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "grammar/token_masker.h"

namespace flare::grammar {

struct AllowedTokens {
  std::shared_ptr<const TokenMask> mask;  // never null
  std::vector<TokenId> end_tokens;        // also allowed: the text may end here
  bool empty() const;
};

class GrammarCursor {
 public:
  // end_tokens: what ends the text where the grammar accepts it (EOS, stop tokens); they are
  // never matched as bytes.
  GrammarCursor(std::shared_ptr<const TokenMasker> masker, std::vector<TokenId> end_tokens);

  // The tokens allowed next, when at most `budget` (>= 1) tokens, this one included, may finish
  // the text. Never empty: where nothing can close in time, the unnarrowed mask.
  AllowedTokens next(std::int32_t budget);
  // Moves by the token's bytes (an end token ends the text); false when the grammar rejects it
  // (the state is then unchanged).
  bool accept(TokenId token);
  // The text is complete: an end token was accepted, or the grammar allows nothing more.
  bool ended() const { return ended_ || matcher_.complete(); }
  bool can_end() const { return matcher_.can_end(); }
  // The fewest tokens (one byte each) that complete the text from here.
  std::uint32_t min_tokens() { return matcher_.completion_cost(matcher_.state()); }
  const Matcher& matcher() const { return matcher_; }
  const std::vector<TokenId>& end_tokens() const { return end_tokens_; }

 private:
  std::shared_ptr<const TokenMasker> masker_;
  std::vector<TokenId> end_tokens_;
  Matcher matcher_;
  bool ended_ = false;
};

}  // namespace flare::grammar
