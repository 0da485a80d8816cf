// Structured outputs in the engine's terms: a token constraint (engine/token_constraint.h) that
// keeps a choice's text inside a grammar (src/grammar: JSON Schema, regex, choice, GBNF), with
// masks from the grammar's TokenMasker and a close forced in time for the token budget.
// Reasoning models: when the prompt opened a reasoning block, the reasoning is free (end tokens
// aside) until the model closes it, or until the budget leaves only room to close it and write
// the shortest constrained text; the grammar applies after the close.
// Built on an HTTP thread; the engine clones it per choice.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/token_constraint.h"
#include "grammar/constraint_spec.h"
#include "grammar/grammar_cache.h"
#include "grammar/grammar_cursor.h"
#include "server/frontend.h"

namespace flare::server {

// The compiled-grammar cache of the frontend's vocabulary (one per served model, built on first use).
grammar::GrammarCache& grammar_cache_for(const Frontend& frontend);

// The masker for `spec`, compiled or cached; a GrammarError becomes a 400 naming its path.
std::shared_ptr<const grammar::TokenMasker> compile_for_request(const Frontend& frontend, const grammar::ConstraintSpec& spec);

// Tokens that write exactly `text`: the tokenizer's own encoding when it decodes back to the text,
// else the longest vocabulary match at each position; a 400 naming `field` when the vocabulary
// cannot write it.
std::vector<TokenId> tokens_writing(const Frontend& frontend, const TokenVocabulary& vocabulary, const std::string& text,
                                    const std::string& field);

// A grammar's allowed tokens as a rule (forced when only one).
engine::TokenRule token_rule(const grammar::AllowedTokens& allowed);

class GrammarConstraint final : public engine::TokenConstraint {
 public:
  // reasoning_close: the tokens that close an open reasoning block (empty: the grammar applies
  // from the first token); reasoning_marker: the text whose appearance closes it.
  GrammarConstraint(grammar::GrammarCursor cursor, std::shared_ptr<const TokenVocabulary> vocabulary,
                    std::vector<TokenId> reasoning_close = {}, std::string reasoning_marker = {});

  std::unique_ptr<engine::TokenConstraint> clone() const override;
  engine::TokenRule next(std::int32_t n_tokens_left) override;
  void accept(TokenId token) override;
  bool finished() const override { return stage_ == Stage::done; }

  // The fewest tokens a complete answer takes (the forced close included).
  std::int32_t min_tokens();

 private:
  enum class Stage : std::uint8_t { reasoning, closing, grammar, done };
  grammar::GrammarCursor cursor_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::vector<TokenId> reasoning_close_;
  std::string reasoning_marker_;
  std::string reasoning_tail_;  // the last bytes of the reasoning, to find the marker across tokens
  std::shared_ptr<const std::vector<std::uint64_t>> reasoning_mask_;  // everything but end tokens
  Stage stage_ = Stage::grammar;
  std::size_t position_ = 0;  // tokens of reasoning_close_ written
};

// Sets request.constraint to follow `spec` (request.stop_token_ids must be read already: they end
// a text the grammar lets end, as the model's EOS does). `prompt_opened_reasoning`: see above.
// 400s: the spec (naming its path), and `max_tokens_field` when the shortest answer cannot fit.
void apply_structured_output(const Frontend& frontend, const ModelInfo& model, const grammar::ConstraintSpec& spec,
                             bool prompt_opened_reasoning, const std::string& max_tokens_field,
                             engine::GenerationRequest& request);

}  // namespace flare::server
