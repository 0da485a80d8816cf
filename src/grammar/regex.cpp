// Regular expressions to grammar rules (regex.h): a recursive-descent parser to a small tree of
// code-point sets, concatenations, alternations and repeats, then emission into a builder.
#include "grammar/regex.h"

#include <memory>
#include <optional>

#include <fmt/format.h>

#include "grammar/code_points.h"
#include "grammar/json_characters.h"

namespace flare::grammar {
namespace {

struct Node {
  enum class Kind { set, concat, alternation, repeat };
  Kind kind = Kind::concat;
  CodePointSet set;
  std::vector<Node> children;
  std::uint32_t min = 0;
  std::optional<std::uint32_t> max;
};

constexpr std::uint32_t kMaxRepeat = 100000;

class Parser {
 public:
  Parser(std::string_view pattern, const std::string& path) : path_(path) { decode(pattern); }

  // Top level: alternatives, each with its anchors.
  struct Branch {
    Node node;
    bool anchored_start = false;
    bool anchored_end = false;
  };
  std::vector<Branch> parse_top() {
    std::vector<Branch> branches;
    for (;;) {
      Branch b;
      if (peek() == '^') {
        ++pos_;
        b.anchored_start = true;
      }
      b.node = parse_sequence(/*top=*/true);
      if (peek() == '$') {
        ++pos_;
        b.anchored_end = true;
      }
      branches.push_back(std::move(b));
      if (at_end()) break;
      if (peek() == '|') {
        ++pos_;
        continue;
      }
      error(peek() == ')' ? "unbalanced ')'" : "'$' is only supported at the end of the pattern");
    }
    return branches;
  }

 private:
  [[noreturn]] void error(const std::string& message) const {
    throw GrammarError(path_, fmt::format("{} (pattern position {})", message, pos_));
  }
  bool at_end() const { return pos_ >= text_.size(); }
  std::uint32_t peek(std::size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : 0xFFFFFFFFu; }
  std::uint32_t take() {
    if (at_end()) error("the pattern ends too early");
    return text_[pos_++];
  }

  void decode(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
      const auto b = std::uint8_t(s[i]);
      std::size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
      if (n == 0 || i + n > s.size()) throw GrammarError(path_, "the pattern is not valid UTF-8");
      std::uint32_t c = n == 1 ? b : n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
      for (std::size_t k = 1; k < n; ++k) {
        const auto cb = std::uint8_t(s[i + k]);
        if ((cb & 0xC0) != 0x80) throw GrammarError(path_, "the pattern is not valid UTF-8");
        c = (c << 6) | (cb & 0x3F);
      }
      text_.push_back(c);
      i += n;
    }
  }

  Node parse_alternation() {
    Node alt{Node::Kind::alternation, {}, {}, 0, {}};
    alt.children.push_back(parse_sequence(false));
    while (peek() == '|') {
      ++pos_;
      alt.children.push_back(parse_sequence(false));
    }
    return alt.children.size() == 1 ? std::move(alt.children[0]) : alt;
  }

  Node parse_sequence(bool top) {
    Node seq{Node::Kind::concat, {}, {}, 0, {}};
    while (!at_end()) {
      const auto c = peek();
      if (c == '|' || c == ')') break;
      if (c == '$') {
        if (top && (pos_ + 1 == text_.size() || peek(1) == '|')) break;
        error("'$' is only supported at the end of the pattern");
      }
      if (c == '^') error("'^' is only supported at the start of the pattern");
      Node atom = parse_atom();
      parse_quantifier(atom);
      seq.children.push_back(std::move(atom));
    }
    return seq;
  }

  void parse_quantifier(Node& atom) {
    for (;;) {
      const auto c = peek();
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
      } else if (c == '{' && parse_braces(min, max)) {
      } else {
        return;
      }
      if (peek() == '?' || peek() == '+') ++pos_;  // lazy or possessive: the same texts
      Node repeat{Node::Kind::repeat, {}, {}, min, max};
      repeat.children.push_back(std::move(atom));
      atom = std::move(repeat);
    }
  }

  // {n} {n,} {n,m}; a '{' that does not start one is a literal (as in PCRE and ECMAScript).
  bool parse_braces(std::uint32_t& min, std::optional<std::uint32_t>& max) {
    std::size_t p = pos_ + 1;
    auto number = [&](std::optional<std::uint32_t>& out) {
      std::uint64_t v = 0;
      std::size_t start = p;
      while (p < text_.size() && text_[p] >= '0' && text_[p] <= '9') {
        v = v * 10 + (text_[p] - '0');
        if (v > kMaxRepeat) {
          pos_ = p;
          error(fmt::format("a repetition count above {} is not supported", kMaxRepeat));
        }
        ++p;
      }
      if (p > start) out = std::uint32_t(v);
    };
    std::optional<std::uint32_t> lo, hi;
    number(lo);
    if (!lo) return false;
    if (p < text_.size() && text_[p] == '}') {
      min = *lo;
      max = *lo;
      pos_ = p + 1;
      return true;
    }
    if (p >= text_.size() || text_[p] != ',') return false;
    ++p;
    number(hi);
    if (p >= text_.size() || text_[p] != '}') return false;
    min = *lo;
    max = hi;
    pos_ = p + 1;
    if (max && *max < min) error("a repetition's maximum is below its minimum");
    return true;
  }

  Node set_node(CodePointSet set) { return Node{Node::Kind::set, std::move(set), {}, 0, {}}; }

  Node parse_atom() {
    const auto c = take();
    switch (c) {
      case '(': {
        if (peek() == '?') {
          ++pos_;
          const auto k = take();
          if (k == ':') {
          } else if (k == '<' && peek() != '=' && peek() != '!') {
            skip_group_name('>');
          } else if (k == 'P' && peek() == '<') {
            ++pos_;
            skip_group_name('>');
          } else if (k == '=' || k == '!' || k == '<') {
            error("lookaround assertions are not supported");
          } else {
            error("inline flags and other group extensions are not supported");
          }
        }
        Node inner = parse_alternation();
        if (take() != ')') error("missing ')'");
        return inner;
      }
      case '[':
        return set_node(parse_class());
      case '.':
        return set_node(CodePointSet::all().minus(CodePointSet::of('\n')));
      case '\\':
        return set_node(parse_escape(false));
      case '*':
      case '+':
      case '?':
        error("a quantifier has nothing to repeat");
      case ')':
        error("unbalanced ')'");
      default:
        return set_node(CodePointSet::of(c));
    }
  }

  void skip_group_name(std::uint32_t close) {
    while (!at_end() && peek() != close) ++pos_;
    if (take() != close) error("unterminated group name");
  }

  std::uint32_t parse_hex(std::size_t n_digits) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < n_digits; ++i) {
      const auto d = take();
      const int digit = d >= '0' && d <= '9' ? int(d - '0') : d >= 'a' && d <= 'f' ? int(d - 'a' + 10)
                      : d >= 'A' && d <= 'F' ? int(d - 'A' + 10) : -1;
      if (digit < 0) error("a hexadecimal escape needs hexadecimal digits");
      v = v * 16 + std::uint32_t(digit);
    }
    return v;
  }

  static CodePointSet digits() { return CodePointSet::range('0', '9'); }
  static CodePointSet word() {
    CodePointSet s = CodePointSet::range('0', '9');
    s.add('A', 'Z');
    s.add('a', 'z');
    s.add('_', '_');
    return s;
  }
  static CodePointSet space() {
    CodePointSet s = CodePointSet::range('\t', '\r');  // \t \n \v \f \r
    s.add(' ', ' ');
    return s;
  }

  CodePointSet parse_escape(bool in_class) {
    const auto c = take();
    switch (c) {
      case 'd': return digits();
      case 'D': return digits().complement();
      case 'w': return word();
      case 'W': return word().complement();
      case 's': return space();
      case 'S': return space().complement();
      case 'n': return CodePointSet::of('\n');
      case 'r': return CodePointSet::of('\r');
      case 't': return CodePointSet::of('\t');
      case 'f': return CodePointSet::of('\f');
      case 'v': return CodePointSet::of('\v');
      case '0': return CodePointSet::of(0);
      case 'x': return CodePointSet::of(parse_hex(2));
      case 'u': {
        if (peek() == '{') {
          ++pos_;
          std::uint32_t v = 0;
          std::size_t n = 0;
          while (peek() != '}') {
            v = v * 16 + parse_hex(1);
            if (++n > 6 || v > kMaxCodePoint) error("a \\u{...} escape beyond U+10FFFF");
          }
          ++pos_;
          if (n == 0) error("an empty \\u{} escape");
          return CodePointSet::of(v);
        }
        return CodePointSet::of(parse_hex(4));
      }
      case 'b':
        if (in_class) return CodePointSet::of('\b');
        error("word boundaries (\\b) are not supported");
      case 'B':
        error("word boundaries (\\B) are not supported");
      default:
        if (c >= '1' && c <= '9') error("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) error(fmt::format("the escape \\{} is not supported", char(c)));
        return CodePointSet::of(c);  // an escaped punctuation or other character stands for itself
    }
  }

  CodePointSet parse_class() {
    bool negated = false;
    if (peek() == '^') {
      ++pos_;
      negated = true;
    }
    CodePointSet set;
    bool first = true;
    for (;;) {
      if (at_end()) error("missing ']'");
      std::uint32_t c = peek();
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (c == '[' && peek(1) == ':') error("POSIX character classes ([:name:]) are not supported");
      // One item: a character (maybe the start of a range) or an escape class.
      std::optional<std::uint32_t> low;
      ++pos_;
      if (c == '\\') {
        CodePointSet escaped = parse_escape(true);
        if (escaped.ranges().size() == 1 && escaped.ranges()[0].first == escaped.ranges()[0].second) {
          low = escaped.ranges()[0].first;
        } else {
          set.add(escaped);
          continue;
        }
      } else {
        low = c;
      }
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFFu) {
        ++pos_;
        std::uint32_t high = take();
        if (high == '\\') {
          CodePointSet escaped = parse_escape(true);
          if (escaped.ranges().size() != 1 || escaped.ranges()[0].first != escaped.ranges()[0].second) {
            error("a class range must end at a single character");
          }
          high = escaped.ranges()[0].first;
        }
        if (high < *low) error("a class range is out of order");
        set.add(*low, high);
      } else {
        set.add(*low, *low);
      }
    }
    return negated ? set.complement() : set;
  }

  std::string path_;
  std::vector<std::uint32_t> text_;
  std::size_t pos_ = 0;
};

class Emitter {
 public:
  Emitter(GrammarBuilder& builder, const RegexOptions& options, const std::string& path)
      : b_(builder), options_(options), path_(path) {}

  Sequence emit(const Node& node) {
    switch (node.kind) {
      case Node::Kind::set: {
        if (node.set.empty()) throw GrammarError(path_, "the pattern has a class that matches no character");
        auto alternatives = options_.json_string ? json_character_alternatives(b_, node.set) : utf8_alternatives(b_, node.set);
        return {b_.choice(std::move(alternatives))};
      }
      case Node::Kind::concat: {
        Sequence out;
        for (const auto& child : node.children) append(out, emit(child));
        b_.check_limits(path_);
        return out;
      }
      case Node::Kind::alternation: {
        std::vector<Sequence> alternatives;
        for (const auto& child : node.children) alternatives.push_back(emit(child));
        return {b_.choice(std::move(alternatives))};
      }
      case Node::Kind::repeat: {
        Sequence body = emit(node.children[0]);
        // A repeated body is emitted once as a rule, so that large counts copy one element each.
        if (body.size() != 1) body = {b_.choice({std::move(body)})};
        return b_.repeat(body, node.min, node.max, path_);
      }
    }
    return {};
  }

  Sequence any_text() {
    auto alternatives = options_.json_string ? json_character_alternatives(b_, CodePointSet::all())
                                             : utf8_alternatives(b_, CodePointSet::all());
    return {b_.star({b_.choice(std::move(alternatives))})};
  }

 private:
  GrammarBuilder& b_;
  const RegexOptions& options_;
  const std::string& path_;
};

}  // namespace

Sequence compile_regex(GrammarBuilder& builder, std::string_view pattern, const RegexOptions& options,
                       const std::string& path) {
  Parser parser(pattern, path);
  auto branches = parser.parse_top();
  Emitter emitter(builder, options, path);
  std::vector<Sequence> alternatives;
  for (const auto& branch : branches) {
    Sequence s;
    if (options.search && !branch.anchored_start) append(s, emitter.any_text());
    append(s, emitter.emit(branch.node));
    if (options.search && !branch.anchored_end) append(s, emitter.any_text());
    alternatives.push_back(std::move(s));
  }
  if (alternatives.size() == 1) return alternatives[0];
  return {builder.choice(std::move(alternatives))};
}

Grammar regex_grammar(std::string_view pattern, const std::string& path) {
  GrammarBuilder builder;
  Sequence body = compile_regex(builder, pattern, {}, path);
  const auto root = builder.add_rule("root", {std::move(body)});
  return builder.build(root, path);
}

}  // namespace flare::grammar
