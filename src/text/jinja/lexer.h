// Template lexer: the transformers preprocessing (trim_blocks, lstrip_blocks, the trailing
// newline, the `generation` tag) and tokenization, as @huggingface/jinja does it. Every token
// carries the line and column of its first byte in the original source for error messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flare::text::jinja {

enum class TokenType : uint8_t {
  text, numeric_literal, string_literal, identifier, equals, open_paren, close_paren,
  open_statement, close_statement, open_expression, close_expression, open_square_bracket,
  close_square_bracket, open_curly_bracket, close_curly_bracket, comma, dot, colon, pipe,
  additive_operator, multiplicative_operator, exponentiation_operator, comparison_operator,
  unary_operator, comment,
};

struct SourcePos {
  uint32_t line = 1;
  uint32_t column = 1;  // in code points
};

struct Token {
  std::string value;
  TokenType type;
  uint32_t offset;  // byte offset in the original source
};

// Line and column of a byte offset (computed only when an error is reported).
SourcePos position_of(std::string_view source, uint32_t offset);

const char* token_type_name(TokenType type);

// Throws flare::Error with "line L, column C" on malformed input.
std::vector<Token> tokenize(std::string_view source);

}  // namespace flare::text::jinja
