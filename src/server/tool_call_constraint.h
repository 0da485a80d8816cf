// tool_choice "required" and named functions, enforced: a token constraint (engine/token_constraint.h)
// that makes the model write one tool call in its own format. The call's opening text up to the
// arguments is forced (when several functions are allowed the model picks the name, token by token,
// among theirs), the arguments are generated under the grammar of the chosen function's parameters
// schema (grammar/json_schema_grammar.h; a schema it cannot enforce leaves a tool without "strict":
// true any JSON object, and is a 400 for a strict one), closed in time for the token budget, and
// the closing text is forced; the choice then ends (stop). The format's parser reads one call of an
// allowed function, whatever the weights, and streaming is unchanged (the forced tokens are
// ordinary output tokens).
// Built on an HTTP thread from the frontend; the engine clones it per choice.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/token_constraint.h"
#include "grammar/grammar_cursor.h"
#include "server/frontend.h"
#include "text/tool_call_forcing.h"

namespace flare::server {

class ToolCallConstraint final : public engine::TokenConstraint {
 public:
  // prefixes: per allowed function, the tokens of the opening text up to the arguments;
  // suffix: the tokens of the closing text; arguments: per prefix, the cursor of its arguments'
  // grammar at the start.
  ToolCallConstraint(std::vector<std::vector<TokenId>> prefixes, std::vector<TokenId> suffix,
                     std::vector<grammar::GrammarCursor> arguments);

  std::unique_ptr<engine::TokenConstraint> clone() const override;
  engine::TokenRule next(int32_t n_tokens_left) override;
  void accept(TokenId token) override;
  bool finished() const override { return stage_ == Stage::done; }

  // The fewest tokens a complete call takes (a prefix, the shortest arguments its schema allows
  // as single bytes, the suffix; the least over the functions).
  int32_t min_tokens() const;

 private:
  enum class Stage : uint8_t { prefix, arguments, suffix, done };

  std::vector<std::vector<TokenId>> prefixes_;
  std::vector<TokenId> suffix_;
  std::vector<grammar::GrammarCursor> starts_;  // per prefix
  std::vector<size_t> min_arguments_tokens_;   // per prefix
  Stage stage_ = Stage::prefix;
  size_t position_ = 0;        // tokens read of the prefix or suffix
  std::vector<size_t> alive_;  // prefixes still matching what was generated
  std::optional<grammar::GrammarCursor> arguments_;
};

// The constraint that writes one call of one of `function_names`: text_of(name)'s prefix, the
// arguments under that function's "parameters" schema in `tools` (as force_tool_call says), its
// suffix. 400s naming `field`: text_of gives nullopt (no known format), the vocabulary cannot
// write the text, a strict tool's schema cannot be enforced.
std::shared_ptr<ToolCallConstraint> build_tool_call_constraint(
    const Frontend& frontend, const std::vector<std::string>& function_names, const nlohmann::ordered_json& tools,
    const std::function<std::optional<text::ForcedToolCallText>(const std::string&)>& text_of, const std::string& field);

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
