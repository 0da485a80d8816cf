// GrammarCursor (grammar_cursor.h).
#include "grammar/grammar_cursor.h"

#include <algorithm>

namespace flare::grammar {
namespace {

// Node pools grow with every distinct stack; past this size a cursor keeps only its state's.
constexpr std::size_t kCompactNodes = 1 << 16;
constexpr std::size_t kCompactStates = 1 << 14;

}  // namespace

bool AllowedTokens::empty() const {
  if (!end_tokens.empty()) return false;
  return std::all_of(mask->begin(), mask->end(), [](std::uint64_t w) { return w == 0; });
}

GrammarCursor::GrammarCursor(std::shared_ptr<const TokenMasker> masker, std::vector<TokenId> end_tokens)
    : masker_(std::move(masker)), end_tokens_(std::move(end_tokens)), matcher_(masker_->grammar()) {}

AllowedTokens GrammarCursor::next(std::int32_t budget) {
  AllowedTokens out;
  if (matcher_.can_end()) out.end_tokens = end_tokens_;
  std::shared_ptr<const StateMask> cached = masker_->mask(matcher_);
  out.mask = std::shared_ptr<const TokenMask>(cached, &cached->bits);
  const auto room = static_cast<std::uint32_t>(std::max(budget, 1) - 1);  // tokens after this one
  if (cached->max_cost_after <= room || cached->n_allowed == 0) return out;
  // Some token would leave more to close than the budget has: only those that do not.
  auto narrowed = std::make_shared<StateMask>(masker_->compute(matcher_, room));
  if (narrowed->n_allowed == 0 && out.end_tokens.empty()) return out;  // cannot close in time anyway
  out.mask = std::shared_ptr<const TokenMask>(narrowed, &narrowed->bits);
  return out;
}

bool GrammarCursor::accept(TokenId token) {
  if (ended()) return false;
  if (matcher_.can_end() && std::find(end_tokens_.begin(), end_tokens_.end(), token) != end_tokens_.end()) {
    ended_ = true;
    return true;
  }
  if (masker_->trie().excluded(token)) return false;
  if (!matcher_.advance(masker_->trie().token_bytes(token))) return false;
  if (matcher_.n_nodes() > kCompactNodes || matcher_.n_states() > kCompactStates) matcher_.compact();
  return true;
}

}  // namespace flare::grammar
