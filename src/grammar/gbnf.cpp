// The GBNF parser (gbnf.h): recursive descent straight into a GrammarBuilder.
#include "grammar/gbnf.h"

#include <map>
#include <optional>

#include <fmt/format.h>

#include "grammar/code_points.h"

namespace flare::grammar {
namespace {

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  Grammar parse() {
    skip_space(true);
    while (pos_ < text_.size()) {
      const auto name_pos = pos_;
      const std::string name = parse_name();
      skip_space(false);
      if (text_.substr(pos_, 3) != "::=") error("expected '::=' after the rule name");
      pos_ += 3;
      const auto rule = rule_id(name);
      if (builder_.defined(rule)) {
        pos_ = name_pos;
        error(fmt::format("rule '{}' is defined twice", name));
      }
      skip_space(true);
      builder_.define(rule, parse_alternatives(false));
      builder_.check_limits(path_);
      if (pos_ < text_.size() && text_[pos_] != '\n' && text_[pos_] != '\r') error("expected the end of the rule");
      skip_space(true);
    }
    auto root = rules_.find("root");
    if (root == rules_.end() || !builder_.defined(root->second)) throw GrammarError(path_, "the grammar has no 'root' rule");
    for (const auto& [name, id] : rules_) {
      if (!builder_.defined(id)) throw GrammarError(path_, fmt::format("rule '{}' is used but never defined", name));
    }
    return builder_.build(root->second, path_);
  }

 private:
  [[noreturn]] void error(const std::string& message) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw GrammarError(path_, fmt::format("{} (line {}, column {})", message, line, column));
  }

  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  // Spaces, tabs and comments; newlines too when `newlines` (or inside parentheses).
  void skip_space(bool newlines) {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || ((newlines || depth_ > 0) && (c == '\n' || c == '\r'))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const auto start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) error("expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  std::uint32_t rule_id(const std::string& name) {
    auto [it, inserted] = rules_.emplace(name, 0);
    if (inserted) it->second = builder_.declare(name);
    return it->second;
  }

  std::vector<Sequence> parse_alternatives(bool nested) {
    std::vector<Sequence> alternatives;
    alternatives.push_back(parse_sequence());
    while (pos_ < text_.size() && text_[pos_] == '|') {
      ++pos_;
      skip_space(true);
      alternatives.push_back(parse_sequence());
    }
    (void)nested;
    return alternatives;
  }

  Sequence parse_sequence() {
    Sequence sequence;
    for (;;) {
      skip_space(false);
      if (pos_ >= text_.size()) break;
      const char c = text_[pos_];
      if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
      Sequence atom = parse_atom();
      skip_space(false);
      parse_postfix(atom);
      append(sequence, atom);
      builder_.check_limits(path_);
    }
    return sequence;
  }

  void parse_postfix(Sequence& atom) {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      std::uint32_t min = 0;
      std::optional<std::uint32_t> max;
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        min = 1;
      } else if (c == '?') {
        ++pos_;
        max = 1;
      } else if (c == '{') {
        ++pos_;
        skip_space(false);
        min = parse_count();
        skip_space(false);
        if (pos_ < text_.size() && text_[pos_] == ',') {
          ++pos_;
          skip_space(false);
          if (pos_ < text_.size() && text_[pos_] != '}') max = parse_count();
        } else {
          max = min;
        }
        skip_space(false);
        if (pos_ >= text_.size() || text_[pos_] != '}') error("expected '}'");
        ++pos_;
      } else {
        return;
      }
      Sequence body = atom.size() == 1 ? atom : Sequence{builder_.choice({atom})};
      atom = builder_.repeat(body, min, max, path_);
      skip_space(false);
    }
  }

  std::uint32_t parse_count() {
    std::uint64_t v = 0;
    const auto start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      v = v * 10 + std::uint64_t(text_[pos_] - '0');
      if (v > 100000) error("a repetition count above 100000 is not supported");
      ++pos_;
    }
    if (pos_ == start) error("expected a repetition count");
    return std::uint32_t(v);
  }

  Sequence parse_atom() {
    const char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (pos_ < text_.size() && text_[pos_] != '"') {
        if (text_[pos_] == '\n') error("a string literal does not end on its line");
        append_utf8(parse_char(), bytes);
      }
      if (pos_ >= text_.size()) error("missing '\"'");
      ++pos_;
      return builder_.literal(bytes);
    }
    if (c == '[') {
      ++pos_;
      bool negated = false;
      if (pos_ < text_.size() && text_[pos_] == '^') {
        negated = true;
        ++pos_;
      }
      CodePointSet set;
      while (pos_ < text_.size() && text_[pos_] != ']') {
        const auto low = parse_char();
        if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
          ++pos_;
          const auto high = parse_char();
          if (high < low) error("a class range is out of order");
          set.add(low, high);
        } else {
          set.add(low, low);
        }
      }
      if (pos_ >= text_.size()) error("missing ']'");
      ++pos_;
      if (negated) set = set.complement();
      if (set.empty()) error("the class matches no character");
      return {builder_.choice(utf8_alternatives(builder_, set))};
    }
    if (c == '.') {
      ++pos_;
      return {builder_.choice(utf8_alternatives(builder_, CodePointSet::all()))};
    }
    if (c == '(') {
      ++pos_;
      ++depth_;
      skip_space(true);
      auto alternatives = parse_alternatives(true);
      skip_space(true);
      --depth_;
      if (pos_ >= text_.size() || text_[pos_] != ')') error("missing ')'");
      ++pos_;
      return {builder_.choice(std::move(alternatives))};
    }
    if (is_name_char(c)) return {GrammarBuilder::ref(rule_id(parse_name()))};
    if (c == '<') error("token references (<...>) are not supported");
    error(fmt::format("unexpected '{}'", c));
  }

  // One character of a literal or class, escapes decoded; UTF-8 read as code points.
  std::uint32_t parse_char() {
    if (pos_ >= text_.size()) error("the grammar ends too early");
    const auto b = std::uint8_t(text_[pos_]);
    if (b == '\\') {
      ++pos_;
      if (pos_ >= text_.size()) error("the grammar ends inside an escape");
      const char e = text_[pos_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': return '\\';
        case '"': return '"';
        case '[': return '[';
        case ']': return ']';
        case '-': return '-';
        case '^': return '^';
        case 'x': return parse_hex(2);
        case 'u': return parse_hex(4);
        case 'U': return parse_hex(8);
        default: --pos_; error(fmt::format("unknown escape '\\{}'", e));
      }
    }
    const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + n > text_.size()) error("the grammar is not valid UTF-8");
    std::uint32_t c = n == 1 ? b : n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
    for (std::size_t k = 1; k < n; ++k) {
      const auto cb = std::uint8_t(text_[pos_ + k]);
      if ((cb & 0xC0) != 0x80) error("the grammar is not valid UTF-8");
      c = (c << 6) | (cb & 0x3F);
    }
    pos_ += n;
    return c;
  }

  std::uint32_t parse_hex(std::size_t n) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (pos_ >= text_.size()) error("a hexadecimal escape ends too early");
      const char d = text_[pos_++];
      const int digit = d >= '0' && d <= '9' ? d - '0' : d >= 'a' && d <= 'f' ? d - 'a' + 10 : d >= 'A' && d <= 'F' ? d - 'A' + 10 : -1;
      if (digit < 0) error("a hexadecimal escape needs hexadecimal digits");
      v = v * 16 + std::uint32_t(digit);
    }
    if (v > kMaxCodePoint) error("an escape beyond U+10FFFF");
    return v;
  }

  std::string_view text_;
  const std::string& path_;
  std::size_t pos_ = 0;
  int depth_ = 0;  // open parentheses: newlines inside them do not end the rule
  GrammarBuilder builder_;
  std::map<std::string, std::uint32_t> rules_;
};

}  // namespace

Grammar gbnf_grammar(std::string_view text, const std::string& path) { return GbnfParser(text, path).parse(); }

}  // namespace flare::grammar
