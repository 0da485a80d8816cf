// Constrained decoding: a per-choice restriction of the tokens the sampler may pick. The server
// builds one for a request (tool_choice "required" or a named function forces a tool call in the
// model's own format); the scheduler asks it for a rule before each token and reports the token
// after. Rules are token lists or bitmasks over the vocabulary (a grammar's masks: most of a
// 150k vocabulary may be allowed), so any sampler can apply them: the host sampler masks the
// logits row (disallowed ids to -inf), a device sampler uploads the mask; forced tokens need no
// sampling at all. Logprobs stay the raw model's.
// Threads: built on an HTTP thread, then used only by the engine thread (one copy per choice).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace flare::engine {

using TokenId = std::int32_t;

struct TokenRule {
  enum class Kind : std::uint8_t {
    any,      // no restriction
    forced,   // exactly tokens[0]
    allowed,  // one of tokens (non-empty)
    mask,     // an id whose bit is set in mask (bit t of word t / 64), or one of tokens
  };
  Kind kind = Kind::any;
  std::vector<TokenId> tokens;
  // Kind::mask: shared, immutable (cached per grammar state); ids beyond it are not allowed.
  std::shared_ptr<const std::vector<std::uint64_t>> mask;
};

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // An independent copy in the same state (each of a request's choices constrains itself).
  virtual std::unique_ptr<TokenConstraint> clone() const = 0;
  // The rule for the next token, when the choice may generate at most n_tokens_left (>= 1) more.
  virtual TokenRule next(std::int32_t n_tokens_left) = 0;
  // The token the choice generated, one the last rule allowed.
  virtual void accept(TokenId token) = 0;
  // The constrained text is complete: the choice finishes (reason stop) after its last token.
  virtual bool finished() const = 0;
  // Whether the constraint decides where the choice ends, now (the default: it ends when
  // finished(), and stop tokens and EOS are only tokens). When false (a constraint that watches
  // free text for a tool call, between calls), the choice ends as an unconstrained one does: on a
  // stop token or EOS once min_tokens are written.
  virtual bool decides_end() const { return true; }
};

}  // namespace flare::engine
