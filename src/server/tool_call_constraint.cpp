// Forced tool calls (tool_call_constraint.h).
#include "server/tool_call_constraint.h"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "text/tool_call_forcing.h"

namespace flare::server {
namespace {

using engine::TokenRule;

constexpr std::string_view kCloseReasoning = "</think>\n\n";
// The bytes JsonPrefix::completion() uses to finish a character split across tokens.
constexpr unsigned char kContinuationBytes[] = {0x80, 0x90, 0xA0};

// Tokens that write exactly `text`: the tokenizer's own encoding when it decodes back to the text
// (it may not: a byte-level tokenizer with add_prefix_space writes a leading space), else the
// longest vocabulary match at each position.
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
    if (length == 0) {
      throw ApiError(400, field, fmt::format("'{}': this model's vocabulary cannot write its tool-call text", field));
    }
    at += length;
  }
  return ids;
}

}  // namespace

ToolCallConstraint::ToolCallConstraint(std::vector<std::vector<TokenId>> prefixes, std::vector<TokenId> suffix,
                                       std::shared_ptr<const TokenVocabulary> vocabulary,
                                       std::vector<std::shared_ptr<const text::JsonSchema>> schemas)
    : prefixes_(std::move(prefixes)),
      suffix_(std::move(suffix)),
      vocabulary_(std::move(vocabulary)),
      schemas_(std::move(schemas)) {
  schemas_.resize(std::max(prefixes_.size(), size_t{1}));
  for (const auto& schema : schemas_) min_arguments_tokens_.push_back(text::JsonPrefix(schema).completion().size());
  arguments_ = text::JsonPrefix(schemas_[0]);
  for (size_t i = 0; i < prefixes_.size(); ++i) alive_.push_back(i);
  can_finish_characters_ = std::all_of(std::begin(kContinuationBytes), std::end(kContinuationBytes),
                                       [&](unsigned char b) { return vocabulary_->byte_token[b] >= 0; });
  if (prefixes_.empty() || std::any_of(prefixes_.begin(), prefixes_.end(), [](const auto& p) { return p.empty(); })) {
    stage_ = Stage::arguments;  // nothing to force first (not produced by force_tool_call)
  }
}

std::unique_ptr<engine::TokenConstraint> ToolCallConstraint::clone() const {
  return std::make_unique<ToolCallConstraint>(*this);
}

int32_t ToolCallConstraint::min_tokens() const {
  size_t shortest = prefixes_.empty() ? min_arguments_tokens_[0] : SIZE_MAX;
  for (size_t i = 0; i < prefixes_.size(); ++i) shortest = std::min(shortest, prefixes_[i].size() + min_arguments_tokens_[i]);
  return static_cast<int32_t>(shortest + suffix_.size());
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
      return arguments_rule(n_tokens_left);
    case Stage::suffix:
      rule.kind = TokenRule::Kind::forced;
      rule.tokens.push_back(suffix_[position_]);
      return rule;
    case Stage::done:
      break;
  }
  return rule;  // finished: the scheduler ends the choice before asking again
}

// Tokens that keep the arguments a valid JSON-object prefix which can still be closed, with the
// suffix, within the tokens left (closing one byte per token); when only closing fits, the next
// byte of the shortest closing is forced.
engine::TokenRule ToolCallConstraint::arguments_rule(int32_t n_tokens_left) {
  const TokenVocabulary& vocabulary = *vocabulary_;
  const int32_t budget = n_tokens_left - static_cast<int32_t>(suffix_.size());  // this token included
  const std::string closing = arguments_.completion();
  TokenRule rule;
  auto force_closing = [&] {
    rule.kind = TokenRule::Kind::forced;
    rule.tokens = {vocabulary.byte_token[static_cast<unsigned char>(closing[0])]};
    return rule;
  };
  if (static_cast<int32_t>(closing.size()) >= budget) return force_closing();
  std::string key = arguments_.state_key();
  if (key != valid_key_) {  // the tokens that keep the JSON valid depend only on the state
    find_valid_json_tokens();
    valid_key_ = std::move(key);
  }
  const auto room = static_cast<size_t>(budget - 1);  // tokens left for closing after this one
  rule.kind = TokenRule::Kind::allowed;
  for (size_t i = 0; i < valid_tokens_.size(); ++i) {
    const TokenId id = valid_tokens_[i];
    if (closing.size() + valid_growth_[i] > room) {  // may not close in time: check (once per state)
      if (closing_after_[i] < 0) {
        text::JsonPrefix trial = arguments_;
        trial.push(vocabulary.bytes[static_cast<size_t>(id)]);
        closing_after_[i] = static_cast<int32_t>(trial.completion().size());
      }
      if (static_cast<size_t>(closing_after_[i]) > room) continue;
    }
    rule.tokens.push_back(id);
  }
  if (rule.tokens.empty()) return force_closing();
  return rule;
}

void ToolCallConstraint::find_valid_json_tokens() {
  const TokenVocabulary& vocabulary = *vocabulary_;
  const auto growth_per_byte = static_cast<uint32_t>(arguments_.max_completion_growth_per_byte());
  std::array<bool, 256> first_byte_ok{};
  for (int b = 0; b < 256; ++b) {
    text::JsonPrefix trial = arguments_;
    first_byte_ok[static_cast<size_t>(b)] = trial.push(static_cast<char>(b));
  }
  valid_tokens_.clear();
  valid_growth_.clear();
  for (size_t id = 0; id < vocabulary.bytes.size(); ++id) {
    const std::string& bytes = vocabulary.bytes[id];
    if (bytes.empty() || vocabulary.control[id] || !first_byte_ok[static_cast<unsigned char>(bytes[0])]) continue;
    text::JsonPrefix trial = arguments_;
    uint32_t growth = 0;
    bool valid = true;
    for (char c : bytes) {
      const bool was_plain = trial.inside_plain_string();
      if (!trial.push(c)) {
        valid = false;
        break;
      }
      if (!was_plain || !trial.inside_plain_string()) growth += growth_per_byte;
    }
    if (!valid || (trial.inside_character() && !can_finish_characters_)) continue;  // no byte tokens to close it
    valid_tokens_.push_back(static_cast<TokenId>(id));
    valid_growth_.push_back(growth);
  }
  closing_after_.assign(valid_tokens_.size(), -1);
}

void ToolCallConstraint::accept(TokenId token) {
  switch (stage_) {
    case Stage::prefix: {
      std::erase_if(alive_, [&](size_t i) { return prefixes_[i][position_] != token; });
      ++position_;
      auto complete = std::find_if(alive_.begin(), alive_.end(), [&](size_t i) { return prefixes_[i].size() == position_; });
      if (alive_.empty() || complete != alive_.end()) {
        // The function is chosen: its arguments follow its schema.
        if (complete != alive_.end()) arguments_ = text::JsonPrefix(schemas_[*complete]);
        stage_ = Stage::arguments;
        position_ = 0;
      }
      return;
    }
    case Stage::arguments:
      if (token >= 0 && static_cast<size_t>(token) < vocabulary_->bytes.size()) arguments_.push(vocabulary_->bytes[size_t(token)]);
      if (arguments_.complete()) stage_ = suffix_.empty() ? Stage::done : Stage::suffix;
      return;
    case Stage::suffix:
      if (++position_ == suffix_.size()) stage_ = Stage::done;
      return;
    case Stage::done:
      return;
  }
}

// The compiled "parameters" of the first tool named `name` (nullptr: none, or not enforceable).
std::shared_ptr<const text::JsonSchema> parameters_schema(const nlohmann::ordered_json& tools, const std::string& name) {
  if (!tools.is_array()) return nullptr;
  for (const auto& tool : tools) {
    auto function = tool.find("function");
    if (function == tool.end() || !function->is_object()) continue;
    auto tool_name = function->find("name");
    if (tool_name == function->end() || *tool_name != name) continue;
    auto parameters = function->find("parameters");
    return parameters == function->end() ? nullptr : text::JsonSchema::compile(*parameters);
  }
  return nullptr;
}

void force_tool_call(const Frontend& frontend, const std::vector<std::string>& function_names,
                     const nlohmann::ordered_json& tools, bool close_reasoning,
                     const std::string& tool_choice_field, const std::string& max_tokens_field,
                     engine::GenerationRequest& request) {
  const std::string format = frontend.tool_call_format();
  auto vocabulary = frontend.token_vocabulary();
  std::vector<std::vector<TokenId>> prefixes;
  std::vector<TokenId> suffix;
  std::vector<std::shared_ptr<const text::JsonSchema>> schemas;
  std::string needed_bytes = "{}[]\":,0123456789ntrueflsa";  // what closing free JSON can write
  for (const auto& name : function_names) {
    auto text = text::forced_tool_call_text(format, name);
    if (!text) {
      throw ApiError(400, tool_choice_field,
                     fmt::format("'{}': this model has no known tool-call format, so a tool call cannot be required",
                                 tool_choice_field));
    }
    std::string prefix = close_reasoning ? std::string(kCloseReasoning) + text->prefix : text->prefix;
    auto ids = tokens_writing(frontend, *vocabulary, prefix, tool_choice_field);
    if (std::find(prefixes.begin(), prefixes.end(), ids) == prefixes.end()) {
      prefixes.push_back(std::move(ids));
      schemas.push_back(parameters_schema(tools, name));
      if (schemas.back()) needed_bytes += schemas.back()->literal_bytes();  // keys and enum values
    }
    suffix = tokens_writing(frontend, *vocabulary, text->suffix, tool_choice_field);  // the same for every name
  }
  for (char c : needed_bytes) {
    if (vocabulary->byte_token[static_cast<unsigned char>(c)] < 0) {
      throw ApiError(400, tool_choice_field,
                     fmt::format("'{}': this model's vocabulary has no token for '{}', so a tool call cannot be required",
                                 tool_choice_field, c));
    }
  }
  auto constraint = std::make_shared<ToolCallConstraint>(std::move(prefixes), std::move(suffix), std::move(vocabulary),
                                                         std::move(schemas));
  if (request.max_tokens < constraint->min_tokens()) {
    fail_field(max_tokens_field, "must be at least {} when a tool call is required (the shortest call takes {} tokens)",
               constraint->min_tokens(), constraint->min_tokens());
  }
  request.constraint = std::move(constraint);
}

}  // namespace flare::server
