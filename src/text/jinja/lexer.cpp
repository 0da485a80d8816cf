// Template lexer (see lexer.h). The preprocessing passes rewrite the source the way the
// reference's regular expressions do, keeping for every output byte the offset of the source
// byte it came from, so tokens can report original line and column.
#include "text/jinja/lexer.h"

#include <array>
#include <utility>

#include "common/error.h"
#include "text/jinja/utf8.h"

namespace flare::text::jinja {

namespace {

// Source text plus, for each byte, its offset in the original template.
struct MappedText {
  std::string text;
  std::vector<uint32_t> origin;
  void push(char c, uint32_t from) {
    text += c;
    origin.push_back(from);
  }
};

bool is_line_start(const std::string& s, size_t i) { return i == 0 || s[i - 1] == '\n' || s[i - 1] == '\r'; }

// lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1"
MappedText lstrip_blocks(const MappedText& in) {
  MappedText out;
  const std::string& s = in.text;
  size_t i = 0;
  while (i < s.size()) {
    if (is_line_start(s, i)) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) i = j;
    }
    // Copy up to and including the next line break.
    while (i < s.size()) {
      out.push(s[i], in.origin[i]);
      ++i;
      if (s[i - 1] == '\n' || s[i - 1] == '\r') break;
    }
  }
  return out;
}

// trim_blocks: /([#%-]})\n/g -> "$1"
MappedText trim_blocks(const MappedText& in) {
  MappedText out;
  const std::string& s = in.text;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' && i >= 2 && s[i - 1] == '}' && (s[i - 2] == '#' || s[i - 2] == '%' || s[i - 2] == '-')) continue;
    out.push(s[i], in.origin[i]);
  }
  return out;
}

bool is_regex_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs: drops transformers' generation tags.
MappedText strip_generation_tags(const MappedText& in) {
  MappedText out;
  const std::string& s = in.text;
  size_t i = 0;
  size_t pending_space = std::string::npos;  // start of a whitespace run copied to out
  while (i < s.size()) {
    if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '%') {
      size_t j = i + 2;
      bool lstrip = j < s.size() && s[j] == '-';
      if (lstrip) ++j;
      while (j < s.size() && is_regex_space(s[j])) ++j;
      if (s.compare(j, 3, "end") == 0) j += 3;
      if (s.compare(j, 10, "generation") == 0) {
        j += 10;
        while (j < s.size() && is_regex_space(s[j])) ++j;
        bool rstrip = j < s.size() && s[j] == '-';
        if (rstrip) ++j;
        if (s.compare(j, 2, "%}") == 0) {
          j += 2;
          if (lstrip && pending_space != std::string::npos) {
            out.text.resize(pending_space);
            out.origin.resize(pending_space);
          }
          if (rstrip) {
            while (j < s.size() && is_regex_space(s[j])) ++j;
          }
          i = j;
          pending_space = std::string::npos;
          continue;
        }
      }
    }
    if (is_regex_space(s[i])) {
      if (pending_space == std::string::npos) pending_space = out.text.size();
    } else {
      pending_space = std::string::npos;
    }
    out.push(s[i], in.origin[i]);
    ++i;
  }
  return out;
}

MappedText preprocess(std::string_view source) {
  MappedText text;
  text.text.assign(source);
  text.origin.resize(source.size());
  for (size_t i = 0; i < source.size(); ++i) text.origin[i] = static_cast<uint32_t>(i);
  if (!text.text.empty() && text.text.back() == '\n') {
    text.text.pop_back();
    text.origin.pop_back();
  }
  return strip_generation_tags(trim_blocks(lstrip_blocks(text)));
}

const std::array<std::pair<const char*, TokenType>, 30> k_mapping_table = {{
    {"{%", TokenType::open_statement}, {"%}", TokenType::close_statement},
    {"{{", TokenType::open_expression}, {"}}", TokenType::close_expression},
    {"(", TokenType::open_paren}, {")", TokenType::close_paren},
    {"{", TokenType::open_curly_bracket}, {"}", TokenType::close_curly_bracket},
    {"[", TokenType::open_square_bracket}, {"]", TokenType::close_square_bracket},
    {",", TokenType::comma}, {".", TokenType::dot}, {":", TokenType::colon}, {"|", TokenType::pipe},
    {"<=", TokenType::comparison_operator}, {">=", TokenType::comparison_operator},
    {"==", TokenType::comparison_operator}, {"!=", TokenType::comparison_operator},
    {"<", TokenType::comparison_operator}, {">", TokenType::comparison_operator},
    {"+", TokenType::additive_operator}, {"-", TokenType::additive_operator},
    {"~", TokenType::additive_operator}, {"**", TokenType::exponentiation_operator},
    {"*", TokenType::multiplicative_operator}, {"//", TokenType::multiplicative_operator},
    {"/", TokenType::multiplicative_operator}, {"%", TokenType::multiplicative_operator},
    {"=", TokenType::equals}, {"", TokenType::text},
}};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

class Lexer {
 public:
  Lexer(std::string_view original, MappedText text) : original_(original), src_(std::move(text)) {}

  std::vector<Token> run();

 private:
  const std::string& s() const { return src_.text; }
  char at(size_t i) const { return i < s().size() ? s()[i] : '\0'; }
  bool starts(std::string_view seq) const { return s().compare(cursor_, seq.size(), seq) == 0; }

  uint32_t offset_of(size_t i) const {
    return static_cast<uint32_t>(i < src_.origin.size() ? src_.origin[i] : original_.size());
  }

  [[noreturn]] void error(size_t at_index, const std::string& message) const {
    SourcePos pos = position_of(original_, offset_of(at_index));
    fail_input("chat template syntax error at line {}, column {}: {}", pos.line, pos.column, message);
  }

  bool space_at(size_t i) const {
    if (i >= s().size()) return false;
    size_t p = i;
    return is_js_space(utf8_next(s(), p));
  }
  void skip_space() {
    while (space_at(cursor_)) utf8_next(s(), cursor_);
  }

  void push(std::string value, TokenType type, size_t at_index) {
    tokens_.push_back(Token{std::move(value), type, offset_of(at_index)});
  }
  void strip_trailing_whitespace();
  std::string consume_string(char quote);
  std::string consume_digits();
  bool lex_comment();
  bool lex_sign();
  bool lex_operator();

  std::string_view original_;
  MappedText src_;
  size_t cursor_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
};

void Lexer::strip_trailing_whitespace() {
  if (tokens_.empty() || tokens_.back().type != TokenType::text) return;
  tokens_.back().value = std::string(js_trim_end(tokens_.back().value));
  if (tokens_.back().value.empty()) tokens_.pop_back();
}

std::string Lexer::consume_string(char quote) {
  size_t start = cursor_ - 1;  // the opening quote
  std::string out;
  while (true) {
    if (cursor_ >= s().size()) error(start, "unterminated string literal");
    char c = s()[cursor_];
    if (c == quote) break;
    if (c != '\\') {
      out += c;
      ++cursor_;
      continue;
    }
    ++cursor_;
    if (cursor_ >= s().size()) error(start, "unexpected end of input in string literal");
    char escaped = s()[cursor_++];
    if (escaped == 'x' || escaped == 'u') {
      size_t length = escaped == 'x' ? 2 : 4;
      if (cursor_ + length > s().size()) error(cursor_, "invalid hexadecimal escape sequence");
      std::string hex = s().substr(cursor_, length);
      char* end = nullptr;
      unsigned long code = std::strtoul(hex.c_str(), &end, 16);
      if (end != hex.c_str() + length || hex.find_first_of("+- ") != std::string::npos) {
        error(cursor_, "invalid hexadecimal escape sequence: \\" + std::string(1, escaped) + hex);
      }
      utf8_append(out, static_cast<char32_t>(code));
      cursor_ += length;
      continue;
    }
    switch (escaped) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'v': out += '\v'; break;
      case '\'': case '"': case '\\': out += escaped; break;
      default: error(cursor_ - 1, std::string("unexpected escaped character: ") + escaped);
    }
  }
  ++cursor_;  // closing quote
  return out;
}

std::string Lexer::consume_digits() {
  size_t start = cursor_;
  while (is_digit(at(cursor_))) ++cursor_;
  return s().substr(start, cursor_ - start);
}

bool Lexer::lex_comment() {
  if (!(at(cursor_) == '{' && at(cursor_ + 1) == '#')) return false;
  size_t start = cursor_;
  cursor_ += 2;
  bool strip_before = at(cursor_) == '-';
  if (strip_before) ++cursor_;
  size_t end = s().find("#}", cursor_);
  if (end == std::string::npos) error(start, "missing end of comment tag");
  std::string comment = s().substr(cursor_, end - cursor_);
  bool strip_after = !comment.empty() && comment.back() == '-';
  if (strip_after) comment.pop_back();
  if (strip_before) strip_trailing_whitespace();
  push(std::move(comment), TokenType::comment, start);
  cursor_ = end + 2;
  if (strip_after) skip_space();
  return true;
}

// A leading + or - is a unary operator (or part of a number) unless it follows an operand.
bool Lexer::lex_sign() {
  char c = at(cursor_);
  if (c != '-' && c != '+') return false;
  if (tokens_.empty() || tokens_.back().type == TokenType::text) error(cursor_, std::string("unexpected character: ") + c);
  switch (tokens_.back().type) {
    case TokenType::identifier: case TokenType::numeric_literal: case TokenType::string_literal:
    case TokenType::close_paren: case TokenType::close_square_bracket:
      return false;
    default: break;
  }
  size_t start = cursor_++;
  std::string number = consume_digits();
  if (!number.empty() && at(cursor_) == '.' && is_digit(at(cursor_ + 1))) {
    ++cursor_;
    number += "." + consume_digits();
  }
  push(std::string(1, c) + number, number.empty() ? TokenType::unary_operator : TokenType::numeric_literal, start);
  return true;
}

bool Lexer::lex_operator() {
  for (const auto& [seq, type] : k_mapping_table) {
    if (type == TokenType::text) break;
    if (seq[0] != at(cursor_)) continue;
    std::string_view sequence(seq);
    if (sequence == "}}" && curly_depth_ > 0) continue;
    if (!starts(sequence)) continue;
    push(std::string(sequence), type, cursor_);
    if (type == TokenType::open_expression) curly_depth_ = 0;
    if (type == TokenType::open_curly_bracket) ++curly_depth_;
    if (type == TokenType::close_curly_bracket) --curly_depth_;
    cursor_ += sequence.size();
    return true;
  }
  return false;
}

std::vector<Token> Lexer::run() {
  while (cursor_ < s().size()) {
    TokenType last = tokens_.empty() ? TokenType::text : tokens_.back().type;
    if (tokens_.empty() || last == TokenType::close_statement || last == TokenType::close_expression ||
        last == TokenType::comment) {
      size_t start = cursor_;
      while (cursor_ < s().size() &&
             !(s()[cursor_] == '{' && (at(cursor_ + 1) == '%' || at(cursor_ + 1) == '{' || at(cursor_ + 1) == '#'))) {
        ++cursor_;
      }
      if (cursor_ > start) {
        push(s().substr(start, cursor_ - start), TokenType::text, start);
        continue;
      }
    }
    if (lex_comment()) continue;
    if (starts("{%-")) {
      strip_trailing_whitespace();
      push("{%", TokenType::open_statement, cursor_);
      cursor_ += 3;
      continue;
    }
    if (starts("{{-")) {
      strip_trailing_whitespace();
      push("{{", TokenType::open_expression, cursor_);
      curly_depth_ = 0;
      cursor_ += 3;
      continue;
    }
    skip_space();
    if (cursor_ >= s().size()) error(cursor_, "unexpected end of input");
    if (starts("-%}") || starts("-}}")) {
      bool statement = starts("-%}");
      push(statement ? "%}" : "}}", statement ? TokenType::close_statement : TokenType::close_expression, cursor_);
      cursor_ += 3;
      skip_space();
      continue;
    }
    if (lex_sign() || lex_operator()) continue;
    char c = s()[cursor_];
    size_t start = cursor_;
    if (c == '\'' || c == '"') {
      ++cursor_;
      push(consume_string(c), TokenType::string_literal, start);
    } else if (is_digit(c)) {
      std::string number = consume_digits();
      if ((tokens_.empty() || tokens_.back().type != TokenType::dot) && at(cursor_) == '.' && is_digit(at(cursor_ + 1))) {
        ++cursor_;
        number += "." + consume_digits();
      }
      push(std::move(number), TokenType::numeric_literal, start);
    } else if (is_word(c)) {
      while (is_word(at(cursor_))) ++cursor_;
      push(s().substr(start, cursor_ - start), TokenType::identifier, start);
    } else {
      size_t p = cursor_;
      utf8_next(s(), p);
      error(cursor_, "unexpected character: " + s().substr(cursor_, p - cursor_));
    }
  }
  return std::move(tokens_);
}

}  // namespace

SourcePos position_of(std::string_view source, uint32_t offset) {
  SourcePos pos;
  for (size_t k = 0; k < offset && k < source.size(); ++k) {
    if (source[k] == '\n') {
      ++pos.line;
      pos.column = 1;
    } else if ((static_cast<unsigned char>(source[k]) & 0xC0) != 0x80) {
      ++pos.column;
    }
  }
  return pos;
}

const char* token_type_name(TokenType type) {
  static const char* names[] = {
      "Text", "NumericLiteral", "StringLiteral", "Identifier", "Equals", "OpenParen", "CloseParen",
      "OpenStatement", "CloseStatement", "OpenExpression", "CloseExpression", "OpenSquareBracket",
      "CloseSquareBracket", "OpenCurlyBracket", "CloseCurlyBracket", "Comma", "Dot", "Colon", "Pipe",
      "AdditiveBinaryOperator", "MultiplicativeBinaryOperator", "ExponentiationBinaryOperator",
      "ComparisonBinaryOperator", "UnaryOperator", "Comment"};
  return names[static_cast<size_t>(type)];
}

std::vector<Token> tokenize(std::string_view source) {
  Lexer lexer(source, preprocess(source));
  return lexer.run();
}

}  // namespace flare::text::jinja
