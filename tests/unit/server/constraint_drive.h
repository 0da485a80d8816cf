// Driving a token constraint the way a random-weight model would (a uniform pick among the tokens
// its rule allows), and reading the output back through the model family's parser, token by
// token as the server streams it. Shared by the forced and strict tool-call tests. Tests only.
#pragma once

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/token_constraint.h"
#include "server/frontend.h"

namespace flare::server::testing {

// The ids a rule allows, within a vocabulary of `vocab` ids (any: all of them).
inline std::vector<TokenId> allowed_tokens(const engine::TokenRule& rule, size_t vocab) {
  std::vector<TokenId> allowed;
  if (rule.kind == engine::TokenRule::Kind::any) {
    for (size_t t = 0; t < vocab; ++t) allowed.push_back(TokenId(t));
    return allowed;
  }
  allowed = rule.tokens;
  if (rule.kind == engine::TokenRule::Kind::mask) {  // a mask: its bits and its extra tokens
    for (size_t w = 0; w < rule.mask->size(); ++w) {
      for (uint64_t bits = (*rule.mask)[w]; bits != 0; bits &= bits - 1) allowed.push_back(TokenId(w * 64 + __builtin_ctzll(bits)));
    }
  }
  return allowed;
}

inline bool rule_allows(const engine::TokenRule& rule, TokenId token) {
  switch (rule.kind) {
    case engine::TokenRule::Kind::any: return true;
    case engine::TokenRule::Kind::forced: return !rule.tokens.empty() && rule.tokens[0] == token;
    case engine::TokenRule::Kind::allowed: break;
    case engine::TokenRule::Kind::mask:
      if (token >= 0 && size_t(token) / 64 < rule.mask->size() && (((*rule.mask)[size_t(token) / 64] >> (token & 63)) & 1)) return true;
      break;
  }
  return std::find(rule.tokens.begin(), rule.tokens.end(), token) != rule.tokens.end();
}

// A forced call: any allowed token, uniformly, until the constraint is finished.
inline std::vector<TokenId> drive(const engine::TokenConstraint& constraint, int32_t max_tokens, std::mt19937& rng) {
  auto state = constraint.clone();
  std::vector<TokenId> out;
  while (static_cast<int32_t>(out.size()) < max_tokens && !state->finished()) {
    engine::TokenRule rule = state->next(max_tokens - static_cast<int32_t>(out.size()));
    EXPECT_NE(rule.kind, engine::TokenRule::Kind::any);
    std::vector<TokenId> allowed = allowed_tokens(rule, 0);
    EXPECT_FALSE(allowed.empty());
    if (allowed.empty()) break;
    TokenId token = allowed[rng() % allowed.size()];
    state->accept(token);
    out.push_back(token);
  }
  EXPECT_TRUE(state->finished()) << "the call did not close within " << max_tokens << " tokens";
  return out;
}

// Whether the constraint lets `tokens` be written, one after another.
inline bool constraint_accepts(const engine::TokenConstraint& constraint, const std::vector<TokenId>& tokens,
                               int32_t max_tokens) {
  auto state = constraint.clone();
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!rule_allows(state->next(max_tokens - static_cast<int32_t>(i)), tokens[i])) return false;
    state->accept(tokens[i]);
  }
  return true;
}

struct ParsedCall {
  std::string name, arguments;
};
struct ParsedOutput {
  std::string content, reasoning;
  std::vector<ParsedCall> calls;
  int n_calls() const { return static_cast<int>(calls.size()); }
};

inline ParsedOutput parse_output(const Frontend& frontend, const std::vector<TokenId>& tokens,
                                 bool prompt_opened_reasoning = false) {
  auto detokenizer = frontend.make_detokenizer(!frontend.parser_reads_special_tokens());
  ParserOptions options;
  options.parse_tool_calls = true;
  options.prompt_opened_reasoning = prompt_opened_reasoning;
  auto parser = frontend.make_parser(options);
  ParsedOutput out;
  auto take = [&](const std::vector<ParsedEvent>& events) {
    for (const auto& event : events) {
      if (event.kind == ParsedEvent::Kind::content) out.content += event.text;
      if (event.kind == ParsedEvent::Kind::reasoning) out.reasoning += event.text;
      if (event.kind == ParsedEvent::Kind::tool_call_begin) out.calls.push_back({event.tool_name, ""});
      if (event.kind == ParsedEvent::Kind::tool_call_arguments && !out.calls.empty()) out.calls.back().arguments += event.text;
    }
  };
  for (TokenId id : tokens) take(parser->push(detokenizer->push(id)));  // streamed token by token
  take(parser->push(detokenizer->flush()));
  take(parser->finish());
  return out;
}

}  // namespace flare::server::testing
