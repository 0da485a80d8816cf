// Grammar-constrained choices (grammar_constraint.h).
#include "server/grammar_constraint.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "server/api_error.h"

namespace flare::server {
namespace {

constexpr std::string_view kCloseReasoning = "</think>\n\n";
constexpr std::string_view kReasoningMarker = "</think>";

struct VocabularyGrammars {
  std::weak_ptr<const TokenVocabulary> vocabulary;
  std::unique_ptr<grammar::GrammarCache> cache;
};

}  // namespace

grammar::GrammarCache& grammar_cache_for(const Frontend& frontend) {
  // One trie and cache per vocabulary, for the process's life (a server serves one model; tests
  // build a few frontends).
  static std::mutex mutex;
  static std::map<const TokenVocabulary*, VocabularyGrammars> caches;
  auto vocabulary = frontend.token_vocabulary();
  std::lock_guard lock(mutex);
  auto& entry = caches[vocabulary.get()];
  if (!entry.cache || entry.vocabulary.expired()) {
    auto trie = std::make_shared<const grammar::VocabularyTrie>(vocabulary->bytes, vocabulary->control);
    entry.cache = std::make_unique<grammar::GrammarCache>(std::move(trie));
    entry.vocabulary = vocabulary;
  }
  return *entry.cache;
}

std::shared_ptr<const grammar::TokenMasker> compile_for_request(const Frontend& frontend, const grammar::ConstraintSpec& spec) {
  try {
    return grammar_cache_for(frontend).get(spec);
  } catch (const grammar::GrammarError& e) {
    const std::string field = e.path().empty() ? spec.path : e.path();
    throw ApiError(400, field, fmt::format("'{}': {}", field, e.reason()));
  }
}

std::vector<TokenId> tokens_writing(const Frontend& frontend, const TokenVocabulary& vocabulary, const std::string& text,
                                    const std::string& field) {
  std::vector<TokenId> ids = frontend.encode(text, false);
  if (frontend.decode(ids, false) == text) return ids;
  ids.clear();
  for (size_t at = 0; at < text.size();) {
    size_t length = std::min(vocabulary.max_token_bytes, text.size() - at);
    for (; length > 0; --length) {
      auto it = vocabulary.by_bytes.find(text.substr(at, length));
      if (it == vocabulary.by_bytes.end()) continue;
      ids.push_back(it->second);
      break;
    }
    if (length == 0) throw ApiError(400, field, fmt::format("'{}': this model's vocabulary cannot write '{}'", field, text));
    at += length;
  }
  return ids;
}

engine::TokenRule token_rule(const grammar::AllowedTokens& allowed) {
  engine::TokenRule rule;
  std::size_t n = allowed.end_tokens.size();
  TokenId only = n == 1 ? allowed.end_tokens[0] : -1;
  for (std::size_t w = 0; w < allowed.mask->size() && n < 2; ++w) {
    const std::uint64_t bits = (*allowed.mask)[w];
    if (bits == 0) continue;
    n += std::size_t(__builtin_popcountll(bits));
    only = TokenId(w * 64 + std::size_t(__builtin_ctzll(bits)));
  }
  if (n == 1) {
    rule.kind = engine::TokenRule::Kind::forced;
    rule.tokens = {only};
    return rule;
  }
  rule.kind = engine::TokenRule::Kind::mask;
  rule.mask = allowed.mask;
  rule.tokens = allowed.end_tokens;
  return rule;
}

GrammarConstraint::GrammarConstraint(grammar::GrammarCursor cursor, std::shared_ptr<const TokenVocabulary> vocabulary,
                                     std::vector<TokenId> reasoning_close, std::string reasoning_marker)
    : cursor_(std::move(cursor)),
      vocabulary_(std::move(vocabulary)),
      reasoning_close_(std::move(reasoning_close)),
      reasoning_marker_(std::move(reasoning_marker)) {
  if (reasoning_close_.empty()) return;
  stage_ = Stage::reasoning;
  // Reasoning may use any token but those that would end the answer before it is written.
  auto mask = std::make_shared<std::vector<std::uint64_t>>((vocabulary_->bytes.size() + 63) / 64, ~std::uint64_t{0});
  if (const std::size_t tail = vocabulary_->bytes.size() % 64; tail != 0) mask->back() = (std::uint64_t{1} << tail) - 1;
  for (TokenId t : cursor_.end_tokens()) {
    if (t >= 0 && std::size_t(t) < vocabulary_->bytes.size()) (*mask)[std::size_t(t) / 64] &= ~(std::uint64_t{1} << (t & 63));
  }
  reasoning_mask_ = std::move(mask);
}

std::unique_ptr<engine::TokenConstraint> GrammarConstraint::clone() const {
  return std::make_unique<GrammarConstraint>(*this);
}

std::int32_t GrammarConstraint::min_tokens() {
  const auto grammar_tokens = static_cast<std::int64_t>(cursor_.min_tokens());
  const auto close = stage_ == Stage::grammar ? 0 : std::int64_t(reasoning_close_.size() - position_);
  return static_cast<std::int32_t>(std::min<std::int64_t>(grammar_tokens + close, INT32_MAX));
}

engine::TokenRule GrammarConstraint::next(std::int32_t n_tokens_left) {
  engine::TokenRule rule;
  switch (stage_) {
    case Stage::reasoning:
      if (n_tokens_left > min_tokens()) {
        rule.kind = engine::TokenRule::Kind::mask;
        rule.mask = reasoning_mask_;
        return rule;
      }
      stage_ = Stage::closing;  // only the close and the shortest answer still fit
      [[fallthrough]];
    case Stage::closing:
      rule.kind = engine::TokenRule::Kind::forced;
      rule.tokens = {reasoning_close_[position_]};
      return rule;
    case Stage::grammar:
      return token_rule(cursor_.next(n_tokens_left));
    case Stage::done:
      break;
  }
  return rule;  // finished: the scheduler ends the choice before asking again
}

void GrammarConstraint::accept(TokenId token) {
  switch (stage_) {
    case Stage::reasoning: {
      if (token >= 0 && std::size_t(token) < vocabulary_->bytes.size()) reasoning_tail_ += vocabulary_->bytes[std::size_t(token)];
      if (reasoning_tail_.find(reasoning_marker_) != std::string::npos) {
        stage_ = Stage::grammar;
        reasoning_tail_.clear();
      } else if (reasoning_tail_.size() > reasoning_marker_.size()) {
        reasoning_tail_.erase(0, reasoning_tail_.size() - reasoning_marker_.size());
      }
      return;
    }
    case Stage::closing:
      if (++position_ == reasoning_close_.size()) stage_ = Stage::grammar;
      return;
    case Stage::grammar:
      // A token the rule did not allow (a sampler bug) ends the choice rather than derail it.
      if (!cursor_.accept(token) || cursor_.ended()) stage_ = Stage::done;
      return;
    case Stage::done:
      return;
  }
}

void apply_structured_output(const Frontend& frontend, const ModelInfo& model, const grammar::ConstraintSpec& spec,
                             bool prompt_opened_reasoning, const std::string& max_tokens_field,
                             engine::GenerationRequest& request) {
  if (frontend.parser_reads_special_tokens()) {
    fail_field(spec.path, "structured outputs are not supported for this model's output format");
  }
  auto masker = compile_for_request(frontend, spec);
  std::vector<TokenId> end_tokens = model.eos_token_ids;
  for (TokenId t : request.stop_token_ids) {
    if (std::find(end_tokens.begin(), end_tokens.end(), t) == end_tokens.end()) end_tokens.push_back(t);
  }
  auto vocabulary = frontend.token_vocabulary();
  std::vector<TokenId> close;
  if (prompt_opened_reasoning) close = tokens_writing(frontend, *vocabulary, std::string(kCloseReasoning), spec.path);
  auto constraint = std::make_shared<GrammarConstraint>(grammar::GrammarCursor(std::move(masker), std::move(end_tokens)),
                                                        std::move(vocabulary), std::move(close), std::string(kReasoningMarker));
  const std::int32_t shortest = constraint->min_tokens();
  if (request.max_tokens < shortest) {
    fail_field(max_tokens_field, "must be at least {} for this {} (its shortest answer takes {} tokens)", shortest,
               spec.path, shortest);
  }
  request.constraint = std::move(constraint);
}

}  // namespace flare::server
