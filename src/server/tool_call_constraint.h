// tool_choice "required" and named functions, enforced: a token constraint (engine/token_constraint.h)
// that makes the model write one tool call in its own format. The call's opening text up to the
// arguments is forced (when several functions are allowed the model picks the name, token by token,
// among theirs), the arguments are generated under a JSON-object constraint that follows the
// chosen function's parameters schema (text/json_schema.h says which subset, and the fallback for
// the rest) and closes them in time for the token budget, and the closing text is forced; the choice then ends (stop). The
// format's parser reads one call of an allowed function, whatever the weights, and streaming is
// unchanged (the forced tokens are ordinary output tokens).
// Built on an HTTP thread from the frontend; the engine clones it per choice.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/token_constraint.h"
#include "server/frontend.h"
#include "text/json_prefix.h"

namespace flare::server {

class ToolCallConstraint final : public engine::TokenConstraint {
 public:
  // prefixes: per allowed function, the tokens of the opening text up to the arguments;
  // suffix: the tokens of the closing text; schemas: per prefix, the arguments' schema (nullptr or
  // missing: any JSON object).
  ToolCallConstraint(std::vector<std::vector<TokenId>> prefixes, std::vector<TokenId> suffix,
                     std::shared_ptr<const TokenVocabulary> vocabulary,
                     std::vector<std::shared_ptr<const text::JsonSchema>> schemas = {});

  std::unique_ptr<engine::TokenConstraint> clone() const override;
  engine::TokenRule next(int32_t n_tokens_left) override;
  void accept(TokenId token) override;
  bool finished() const override { return stage_ == Stage::done; }

  // The fewest tokens a complete call takes (a prefix, the shortest arguments its schema allows
  // as single bytes, the suffix; the least over the functions).
  int32_t min_tokens() const;

 private:
  enum class Stage : uint8_t { prefix, arguments, suffix, done };
  engine::TokenRule arguments_rule(int32_t n_tokens_left);
  // Sets valid_tokens_ and valid_growth_ for the current state.
  void find_valid_json_tokens();

  std::vector<std::vector<TokenId>> prefixes_;
  std::vector<TokenId> suffix_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::vector<std::shared_ptr<const text::JsonSchema>> schemas_;  // per prefix
  std::vector<size_t> min_arguments_tokens_;                      // per prefix
  Stage stage_ = Stage::prefix;
  size_t position_ = 0;          // tokens read of the prefix or suffix
  std::vector<size_t> alive_;    // prefixes still matching what was generated
  text::JsonPrefix arguments_;
  bool can_finish_characters_ = false;  // the vocabulary has the bytes that finish a split UTF-8 character
  // For the state valid_key_ (JsonPrefix::state_key()): the tokens whose bytes keep the arguments
  // a valid JSON-object prefix (budget aside); for each, a bound on how much it can lengthen the
  // closing text (0 for string characters: the closing stays the same) and, once computed, the
  // closing's exact length after it (-1: not yet).
  std::string valid_key_;
  std::vector<TokenId> valid_tokens_;
  std::vector<uint32_t> valid_growth_;
  std::vector<int32_t> closing_after_;
};

// Sets request.constraint so the model calls one of `function_names`, with arguments following its
// "parameters" schema in `tools` (the adapters' OpenAI-shaped list). Fails with a 400 naming
// `tool_choice_field` when the model has no known tool-call format, and one naming
// `max_tokens_field` when request.max_tokens cannot hold the shortest call (its required keys
// included: a call is never cut short of them). `close_reasoning`:
// the prompt opened a reasoning block, which the forced text closes first.
void force_tool_call(const Frontend& frontend, const std::vector<std::string>& function_names,
                     const nlohmann::ordered_json& tools, bool close_reasoning,
                     const std::string& tool_choice_field, const std::string& max_tokens_field,
                     engine::GenerationRequest& request);

}  // namespace flare::server
