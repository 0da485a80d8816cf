// Forced tool calls (tool_call_constraint.h).
#include "server/tool_call_constraint.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "grammar/constraint_spec.h"
#include "server/api_error.h"
#include "server/grammar_constraint.h"
#include "text/tool_call_forcing.h"

namespace flare::server {
namespace {

using engine::TokenRule;

constexpr std::string_view kCloseReasoning = "</think>\n\n";

}  // namespace

ToolCallConstraint::ToolCallConstraint(std::vector<std::vector<TokenId>> prefixes, std::vector<TokenId> suffix,
                                       std::vector<grammar::GrammarCursor> arguments)
    : prefixes_(std::move(prefixes)), suffix_(std::move(suffix)), starts_(std::move(arguments)) {
  for (auto& start : starts_) min_arguments_tokens_.push_back(start.min_tokens());
  for (size_t i = 0; i < prefixes_.size(); ++i) alive_.push_back(i);
  if (prefixes_.empty() || std::any_of(prefixes_.begin(), prefixes_.end(), [](const auto& p) { return p.empty(); })) {
    stage_ = Stage::arguments;  // nothing to force first (not produced by force_tool_call)
    arguments_ = starts_.at(0);
  }
}

std::unique_ptr<engine::TokenConstraint> ToolCallConstraint::clone() const {
  return std::make_unique<ToolCallConstraint>(*this);
}

int32_t ToolCallConstraint::min_tokens() const {
  size_t shortest = prefixes_.empty() ? min_arguments_tokens_[0] : SIZE_MAX;
  for (size_t i = 0; i < prefixes_.size(); ++i) shortest = std::min(shortest, prefixes_[i].size() + min_arguments_tokens_[i]);
  return static_cast<int32_t>(std::min<size_t>(shortest + suffix_.size(), INT32_MAX));
}

engine::TokenRule ToolCallConstraint::next(int32_t n_tokens_left) {
  TokenRule rule;
  switch (stage_) {
    case Stage::prefix: {
      // The next token of every function still possible; of those whose call still fits in the
      // tokens left, when any does (a long name is not started that cannot be finished).
      auto fits = [&](size_t i) {
        return prefixes_[i].size() - position_ + min_arguments_tokens_[i] + suffix_.size() <= static_cast<size_t>(n_tokens_left);
      };
      const bool any_fits = std::any_of(alive_.begin(), alive_.end(), fits);
      for (size_t i : alive_) {
        if (any_fits && !fits(i)) continue;
        const TokenId token = prefixes_[i][position_];
        if (std::find(rule.tokens.begin(), rule.tokens.end(), token) == rule.tokens.end()) rule.tokens.push_back(token);
      }
      rule.kind = rule.tokens.size() == 1 ? TokenRule::Kind::forced : TokenRule::Kind::allowed;
      return rule;
    }
    case Stage::arguments:
      // The arguments close in the tokens the suffix leaves.
      return token_rule(arguments_->next(n_tokens_left - static_cast<int32_t>(suffix_.size())));
    case Stage::suffix:
      rule.kind = TokenRule::Kind::forced;
      rule.tokens.push_back(suffix_[position_]);
      return rule;
    case Stage::done:
      break;
  }
  return rule;  // finished: the scheduler ends the choice before asking again
}

void ToolCallConstraint::accept(TokenId token) {
  switch (stage_) {
    case Stage::prefix: {
      std::erase_if(alive_, [&](size_t i) { return prefixes_[i][position_] != token; });
      ++position_;
      auto complete = std::find_if(alive_.begin(), alive_.end(), [&](size_t i) { return prefixes_[i].size() == position_; });
      if (alive_.empty() || complete != alive_.end()) {
        // The function is chosen: its arguments follow its schema.
        arguments_ = starts_[complete != alive_.end() ? *complete : 0];
        stage_ = Stage::arguments;
        position_ = 0;
      }
      return;
    }
    case Stage::arguments:
      // A rejected token (a sampler bug) closes the call rather than derail it.
      if (!arguments_->accept(token) || arguments_->ended()) stage_ = suffix_.empty() ? Stage::done : Stage::suffix;
      return;
    case Stage::suffix:
      if (++position_ == suffix_.size()) stage_ = Stage::done;
      return;
    case Stage::done:
      return;
  }
}

namespace {

// The arguments' grammar of the first tool named `name`: its "parameters" schema, or any JSON
// object when it has none, or (without "strict": true) one the grammar cannot enforce.
std::shared_ptr<const grammar::TokenMasker> parameters_grammar(const Frontend& frontend, const nlohmann::ordered_json& tools,
                                                               const std::string& name) {
  grammar::ConstraintSpec any_object;
  any_object.kind = grammar::ConstraintSpec::Kind::json_object;
  if (tools.is_array()) {
    for (size_t i = 0; i < tools.size(); ++i) {
      const auto& tool = tools[i];
      auto function = tool.find("function");
      if (function == tool.end() || !function->is_object()) continue;
      auto tool_name = function->find("name");
      if (tool_name == function->end() || *tool_name != name) continue;
      auto parameters = function->find("parameters");
      if (parameters == function->end() || parameters->is_null()) break;
      auto strict = function->find("strict");
      grammar::ConstraintSpec spec;
      spec.kind = grammar::ConstraintSpec::Kind::json_schema;
      spec.schema = *parameters;
      spec.path = fmt::format("tools[{}].function.parameters", i);
      if (strict != function->end() && strict->is_boolean() && strict->get<bool>()) return compile_for_request(frontend, spec);
      try {
        return compile_for_request(frontend, spec);
      } catch (const ApiError&) {
        break;  // not strict: the call is still forced, its arguments any JSON object
      }
    }
  }
  return compile_for_request(frontend, any_object);
}

}  // namespace

std::shared_ptr<ToolCallConstraint> build_tool_call_constraint(
    const Frontend& frontend, const std::vector<std::string>& function_names, const nlohmann::ordered_json& tools,
    const std::function<std::optional<text::ForcedToolCallText>(const std::string&)>& text_of, const std::string& field) {
  auto vocabulary = frontend.token_vocabulary();
  std::vector<std::vector<TokenId>> prefixes;
  std::vector<TokenId> suffix;
  std::vector<grammar::GrammarCursor> arguments;
  for (const auto& name : function_names) {
    auto text = text_of(name);
    if (!text) {
      throw ApiError(400, field,
                     fmt::format("'{}': this model has no known tool-call format, so a tool call cannot be required", field));
    }
    auto ids = tokens_writing(frontend, *vocabulary, text->prefix, field);
    if (std::find(prefixes.begin(), prefixes.end(), ids) == prefixes.end()) {
      prefixes.push_back(std::move(ids));
      arguments.emplace_back(parameters_grammar(frontend, tools, name), std::vector<TokenId>{});
    }
    suffix = tokens_writing(frontend, *vocabulary, text->suffix, field);  // the same for every name
  }
  // Closing the arguments in time writes one byte per token: the vocabulary must have them.
  for (char c : std::string_view("{}[]\":,0123456789ntrueflsa")) {
    if (vocabulary->byte_token[static_cast<unsigned char>(c)] < 0) {
      throw ApiError(400, field,
                     fmt::format("'{}': this model's vocabulary has no token for '{}', so a tool call cannot be required",
                                 field, c));
    }
  }
  return std::make_shared<ToolCallConstraint>(std::move(prefixes), std::move(suffix), std::move(arguments));
}

void force_tool_call(const Frontend& frontend, const std::vector<std::string>& function_names,
                     const nlohmann::ordered_json& tools, bool close_reasoning,
                     const std::string& tool_choice_field, const std::string& max_tokens_field,
                     engine::GenerationRequest& request) {
  const std::string format = frontend.tool_call_format();
  auto text_of = [&](const std::string& name) {
    auto text = text::forced_tool_call_text(format, name);
    if (text && close_reasoning) text->prefix = std::string(kCloseReasoning) + text->prefix;
    return text;
  };
  auto constraint = build_tool_call_constraint(frontend, function_names, tools, text_of, tool_choice_field);
  if (request.max_tokens < constraint->min_tokens()) {
    fail_field(max_tokens_field, "must be at least {} when a tool call is required (the shortest call takes {} tokens)",
               constraint->min_tokens(), constraint->min_tokens());
  }
  request.constraint = std::move(constraint);
}

}  // namespace flare::server
