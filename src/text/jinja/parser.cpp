// Template parser (see parser.h): a recursive-descent port of @huggingface/jinja's parser,
// with bounds checks on every token access and a nesting limit so hostile input fails cleanly.
#include "text/jinja/parser.h"

#include <cerrno>
#include <cstdlib>
#include <set>

#include "common/error.h"

namespace flare::text::jinja {

namespace {

using T = TokenType;

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, std::string_view source, const ParseLimits& limits)
      : tokens_(tokens), source_(source), limits_(limits) {}

  NodeList run() {
    NodeList program;
    while (current_ < tokens_.size()) program.push_back(parse_any());
    return program;
  }

 private:
  // Depth guard for recursion.
  struct Deeper {
    explicit Deeper(Parser& p) : parser(p) {
      if (++parser.depth_ > parser.limits_.max_depth) parser.error("template nested too deeply");
    }
    ~Deeper() { --parser.depth_; }
    Parser& parser;
  };
  // Left-nested operator chains (a + b + c ...) deepen the tree without recursing here;
  // each wrap counts toward the depth limit until the enclosing rule returns.
  struct Chain {
    explicit Chain(Parser& p) : parser(p) {}
    void wrap() {
      ++n_wrapped;
      if (++parser.depth_ > parser.limits_.max_depth) parser.error("expression nested too deeply");
    }
    ~Chain() { parser.depth_ -= n_wrapped; }
    Parser& parser;
    int n_wrapped = 0;
  };

  [[noreturn]] void error(const std::string& message) const {
    uint32_t offset = current_ < tokens_.size() ? tokens_[current_].offset
                      : tokens_.empty()         ? 0
                                                : tokens_.back().offset;
    SourcePos pos = position_of(source_, offset);
    fail_input("chat template syntax error at line {}, column {}: {}", pos.line, pos.column, message);
  }

  const Token* peek(size_t ahead = 0) const {
    return current_ + ahead < tokens_.size() ? &tokens_[current_ + ahead] : nullptr;
  }
  bool is(T type, size_t ahead = 0) const {
    const Token* token = peek(ahead);
    return token && token->type == type;
  }
  bool is_identifier(std::string_view name, size_t ahead = 0) const {
    const Token* token = peek(ahead);
    return token && token->type == T::identifier && token->value == name;
  }
  bool is_statement(std::initializer_list<std::string_view> names) const {
    if (!is(T::open_statement) || !is(T::identifier, 1)) return false;
    for (auto name : names) {
      if (tokens_[current_ + 1].value == name) return true;
    }
    return false;
  }
  const Token& expect(T type, const char* what) {
    const Token* token = peek();
    if (!token) error(std::string(what) + ", got end of template");
    if (token->type != type) error(std::string(what) + ", got " + token_type_name(token->type) + " '" + token->value + "'");
    ++current_;
    return *token;
  }
  void expect_identifier(std::string_view name) {
    if (!is_identifier(name)) error("expected '" + std::string(name) + "'");
    ++current_;
  }
  const Token& next() {
    if (current_ >= tokens_.size()) error("unexpected end of template");
    return tokens_[current_++];
  }
  NodePtr make(NodeKind kind, uint32_t offset) { return std::make_unique<Node>(kind, offset); }
  uint32_t offset_here() const { return current_ < tokens_.size() ? tokens_[current_].offset : 0; }

  // Parses statements until one of `names` opens a statement.
  NodeList parse_until(std::initializer_list<std::string_view> names) {
    NodeList body;
    while (!is_statement(names)) {
      if (current_ >= tokens_.size()) {
        std::string list;
        for (auto name : names) list += (list.empty() ? "" : " or ") + std::string(name);
        error("unexpected end of template, expected {% " + list + " %}");
      }
      body.push_back(parse_any());
    }
    return body;
  }
  void expect_end(std::string_view name) {
    expect(T::open_statement, "expected '{%'");
    expect_identifier(name);
    expect(T::close_statement, "expected '%}'");
  }

  NodePtr parse_any();
  NodePtr parse_statement();
  NodePtr parse_set();
  NodePtr parse_if();
  NodePtr parse_macro();
  NodePtr parse_for();
  NodePtr parse_call_statement(uint32_t offset);
  NodePtr parse_filter_statement(uint32_t offset);
  NodePtr parse_expression_sequence(bool primary);
  NodePtr parse_expression();
  NodePtr parse_logical_or();
  NodePtr parse_logical_and();
  NodePtr parse_logical_not();
  NodePtr parse_comparison();
  NodePtr parse_additive();
  NodePtr parse_multiplicative();
  NodePtr parse_power();
  NodePtr parse_test();
  NodePtr parse_filter();
  NodePtr parse_unary_sign();
  NodePtr parse_call_member();
  NodePtr parse_call(NodePtr callee);
  NodeList parse_args(bool parameters);
  NodePtr parse_member_arguments();
  NodePtr parse_member(NodePtr object);
  NodePtr parse_primary();

  const std::vector<Token>& tokens_;
  std::string_view source_;
  ParseLimits limits_;
  size_t current_ = 0;
  int depth_ = 0;
};

NodePtr Parser::parse_any() {
  Deeper guard(*this);
  const Token& token = *peek();
  switch (token.type) {
    case T::comment: {
      ++current_;
      return make(NodeKind::comment, token.offset);
    }
    case T::text: {
      ++current_;
      NodePtr node = make(NodeKind::text, token.offset);
      node->text = token.value;
      return node;
    }
    case T::open_statement: return parse_statement();
    case T::open_expression: {
      ++current_;
      NodePtr expression = parse_expression();
      expect(T::close_expression, "expected '}}'");
      return expression;
    }
    default: error(std::string("unexpected token ") + token_type_name(token.type));
  }
}

NodePtr Parser::parse_statement() {
  expect(T::open_statement, "expected '{%'");
  const Token* token = peek();
  if (!token || token->type != T::identifier) error("expected a statement name after '{%'");
  std::string name = token->value;
  uint32_t offset = token->offset;
  ++current_;
  NodePtr result;
  if (name == "set") {
    result = parse_set();
  } else if (name == "if") {
    result = parse_if();
    expect_end("endif");
  } else if (name == "macro") {
    result = parse_macro();
    expect_end("endmacro");
  } else if (name == "for") {
    result = parse_for();
    expect_end("endfor");
  } else if (name == "call") {
    result = parse_call_statement(offset);
  } else if (name == "filter") {
    result = parse_filter_statement(offset);
  } else if (name == "break" || name == "continue") {
    expect(T::close_statement, "expected '%}'");
    result = make(name == "break" ? NodeKind::break_ : NodeKind::continue_, offset);
  } else {
    --current_;
    error("unknown statement '" + name + "'");
  }
  return result;
}

NodePtr Parser::parse_set() {
  NodePtr node = make(NodeKind::set, offset_here());
  node->a = parse_expression_sequence(false);
  if (is(T::equals)) {
    ++current_;
    node->b = parse_expression_sequence(false);
  } else {
    expect(T::close_statement, "expected '%}' or '='");
    node->body = parse_until({"endset"});
    expect(T::open_statement, "expected '{%'");
    expect_identifier("endset");
  }
  expect(T::close_statement, "expected '%}'");
  return node;
}

NodePtr Parser::parse_if() {
  Deeper guard(*this);
  NodePtr node = make(NodeKind::if_, offset_here());
  node->a = parse_expression();
  expect(T::close_statement, "expected '%}'");
  node->body = parse_until({"elif", "else", "endif"});
  if (is_statement({"elif"})) {
    current_ += 2;
    node->alternate.push_back(parse_if());
  } else if (is_statement({"else"})) {
    current_ += 2;
    expect(T::close_statement, "expected '%}'");
    node->alternate = parse_until({"endif"});
  }
  return node;
}

NodePtr Parser::parse_macro() {
  NodePtr name = parse_primary();
  if (name->kind != NodeKind::identifier) error("expected identifier following macro statement");
  NodePtr node = make(NodeKind::macro, name->offset);
  node->text = name->text;
  node->items = parse_args(true);
  expect(T::close_statement, "expected '%}'");
  node->body = parse_until({"endmacro"});
  return node;
}

NodePtr Parser::parse_for() {
  NodePtr node = make(NodeKind::for_, offset_here());
  node->a = parse_expression_sequence(true);
  if (node->a->kind != NodeKind::identifier && node->a->kind != NodeKind::tuple_literal) {
    error("expected identifier or tuple for the loop variable");
  }
  if (!is_identifier("in")) error("expected 'in' after the loop variable");
  ++current_;
  node->b = parse_expression();
  expect(T::close_statement, "expected '%}'");
  node->body = parse_until({"endfor", "else"});
  if (is_statement({"else"})) {
    current_ += 2;
    expect(T::close_statement, "expected '%}'");
    node->alternate = parse_until({"endfor"});
  }
  return node;
}

NodePtr Parser::parse_call_statement(uint32_t offset) {
  NodePtr node = make(NodeKind::call_statement, offset);
  if (is(T::open_paren)) {
    node->flag = true;
    node->items = parse_args(true);
  }
  NodePtr callee = parse_primary();
  if (callee->kind != NodeKind::identifier) error("expected identifier following call statement");
  NodePtr call = make(NodeKind::call, callee->offset);
  call->items = parse_args(false);
  call->a = std::move(callee);
  node->a = std::move(call);
  expect(T::close_statement, "expected '%}'");
  node->body = parse_until({"endcall"});
  expect_end("endcall");
  return node;
}

NodePtr Parser::parse_filter_statement(uint32_t offset) {
  NodePtr node = make(NodeKind::filter_statement, offset);
  NodePtr filter = parse_primary();
  if (filter->kind == NodeKind::identifier && is(T::open_paren)) filter = parse_call(std::move(filter));
  node->a = std::move(filter);
  expect(T::close_statement, "expected '%}'");
  node->body = parse_until({"endfilter"});
  expect_end("endfilter");
  return node;
}

NodePtr Parser::parse_expression_sequence(bool primary) {
  uint32_t offset = offset_here();
  NodeList expressions;
  expressions.push_back(primary ? parse_primary() : parse_expression());
  bool is_tuple = is(T::comma);
  while (is_tuple) {
    ++current_;
    expressions.push_back(primary ? parse_primary() : parse_expression());
    if (!is(T::comma)) break;
  }
  if (!is_tuple) return std::move(expressions[0]);
  NodePtr tuple = make(NodeKind::tuple_literal, offset);
  tuple->items = std::move(expressions);
  return tuple;
}

NodePtr Parser::parse_expression() {
  Deeper guard(*this);
  NodePtr value = parse_logical_or();
  if (!is_identifier("if")) return value;
  uint32_t offset = peek()->offset;
  ++current_;
  NodePtr test = parse_logical_or();
  if (is_identifier("else")) {
    ++current_;
    NodePtr node = make(NodeKind::ternary, offset);
    node->a = std::move(test);
    node->b = std::move(value);
    node->c = parse_expression();
    return node;
  }
  NodePtr node = make(NodeKind::select, offset);
  node->a = std::move(value);
  node->b = std::move(test);
  return node;
}

NodePtr Parser::parse_logical_or() {
  Chain chain(*this);
  NodePtr left = parse_logical_and();
  while (is_identifier("or")) {
    chain.wrap();
    NodePtr node = make(NodeKind::binary, next().offset);
    node->text = "or";
    node->a = std::move(left);
    node->b = parse_logical_and();
    left = std::move(node);
  }
  return left;
}

NodePtr Parser::parse_logical_and() {
  Chain chain(*this);
  NodePtr left = parse_logical_not();
  while (is_identifier("and")) {
    chain.wrap();
    NodePtr node = make(NodeKind::binary, next().offset);
    node->text = "and";
    node->a = std::move(left);
    node->b = parse_logical_not();
    left = std::move(node);
  }
  return left;
}

NodePtr Parser::parse_logical_not() {
  if (is_identifier("not")) {
    Deeper guard(*this);
    NodePtr node = make(NodeKind::unary, next().offset);
    node->text = "not";
    node->a = parse_logical_not();
    return node;
  }
  return parse_comparison();
}

NodePtr Parser::parse_comparison() {
  Chain chain(*this);
  NodePtr left = parse_additive();
  while (true) {
    std::string op;
    uint32_t offset = offset_here();
    if (is_identifier("not") && is_identifier("in", 1)) {
      op = "not in";
      current_ += 2;
    } else if (is_identifier("in") || is(T::comparison_operator)) {
      op = next().value;
    } else {
      break;
    }
    chain.wrap();
    NodePtr node = make(NodeKind::binary, offset);
    node->text = op;
    node->a = std::move(left);
    node->b = parse_additive();
    left = std::move(node);
  }
  return left;
}

NodePtr Parser::parse_additive() {
  Chain chain(*this);
  NodePtr left = parse_multiplicative();
  while (is(T::additive_operator)) {
    chain.wrap();
    const Token& op = next();
    NodePtr node = make(NodeKind::binary, op.offset);
    node->text = op.value;
    node->a = std::move(left);
    node->b = parse_multiplicative();
    left = std::move(node);
  }
  return left;
}

NodePtr Parser::parse_multiplicative() {
  Chain chain(*this);
  NodePtr left = parse_power();
  while (is(T::multiplicative_operator)) {
    chain.wrap();
    const Token& op = next();
    NodePtr node = make(NodeKind::binary, op.offset);
    node->text = op.value;
    node->a = std::move(left);
    node->b = parse_power();
    left = std::move(node);
  }
  return left;
}

NodePtr Parser::parse_power() {
  Chain chain(*this);
  NodePtr left = parse_test();
  while (is(T::exponentiation_operator)) {
    chain.wrap();
    const Token& op = next();
    NodePtr node = make(NodeKind::binary, op.offset);
    node->text = op.value;
    node->a = std::move(left);
    node->b = parse_test();
    left = std::move(node);
  }
  return left;
}

NodePtr Parser::parse_test() {
  Chain chain(*this);
  NodePtr operand = parse_filter();
  while (is_identifier("is")) {
    chain.wrap();
    uint32_t offset = next().offset;
    bool negate = is_identifier("not");
    if (negate) ++current_;
    NodePtr test = parse_primary();
    if (test->kind != NodeKind::identifier) error("expected identifier for the test");
    NodePtr node = make(NodeKind::test, offset);
    node->a = std::move(operand);
    node->text = test->text;
    node->flag = negate;
    operand = std::move(node);
  }
  return operand;
}

NodePtr Parser::parse_filter() {
  Chain chain(*this);
  NodePtr operand = parse_unary_sign();
  while (is(T::pipe)) {
    chain.wrap();
    uint32_t offset = next().offset;
    NodePtr filter = parse_primary();
    if (filter->kind != NodeKind::identifier) error("expected identifier for the filter");
    if (is(T::open_paren)) filter = parse_call(std::move(filter));
    NodePtr node = make(NodeKind::filter, offset);
    node->a = std::move(operand);
    node->b = std::move(filter);
    operand = std::move(node);
  }
  return operand;
}

NodePtr Parser::parse_unary_sign() {
  const Token* token = peek();
  if (token && (token->type == T::unary_operator || token->type == T::additive_operator) &&
      (token->value == "-" || token->value == "+")) {
    Deeper guard(*this);
    ++current_;
    NodePtr node = make(NodeKind::unary, token->offset);
    node->text = token->value;
    node->a = parse_unary_sign();
    return node;
  }
  return parse_call_member();
}

NodePtr Parser::parse_call_member() {
  NodePtr member = parse_member(parse_primary());
  if (is(T::open_paren)) return parse_call(std::move(member));
  return member;
}

NodePtr Parser::parse_call(NodePtr callee) {
  // Iterative form of foo(...).x(...)(...)
  Chain chain(*this);
  while (true) {
    chain.wrap();
    NodePtr call = make(NodeKind::call, callee->offset);
    call->items = parse_args(false);
    call->a = std::move(callee);
    callee = parse_member(std::move(call));
    if (!is(T::open_paren)) return callee;
  }
}

NodeList Parser::parse_args(bool parameters) {
  Deeper guard(*this);
  expect(T::open_paren, "expected '('");
  NodeList args;
  std::set<std::string> names;
  bool saw_keyword = false;
  bool saw_spread = false;
  while (!is(T::close_paren)) {
    if (current_ >= tokens_.size()) error("unexpected end of template in argument list");
    bool keyword_spread = is(T::exponentiation_operator);
    bool positional_spread = is(T::multiplicative_operator) && peek()->value == "*";
    if (parameters && (keyword_spread || positional_spread)) error("argument unpacking is not allowed in parameters");
    uint32_t offset = offset_here();
    if (keyword_spread) {
      ++current_;
      NodePtr node = make(NodeKind::keyword_spread, offset);
      node->a = parse_expression();
      args.push_back(std::move(node));
      if (is(T::comma)) ++current_;
      if (!is(T::close_paren)) error("`**` must be applied to the final argument");
      break;
    }
    NodePtr argument;
    if (positional_spread) {
      if (saw_spread) error("only one `*` argument unpacking is allowed");
      saw_spread = true;
      ++current_;
      argument = make(NodeKind::spread, offset);
      argument->a = parse_expression();
    } else {
      argument = parse_expression();
      if (is(T::equals)) {
        ++current_;
        if (argument->kind != NodeKind::identifier) error("expected identifier for keyword argument");
        NodePtr keyword = make(NodeKind::keyword_argument, argument->offset);
        keyword->text = argument->text;
        keyword->a = parse_expression();
        argument = std::move(keyword);
      }
      if (parameters) {
        if (argument->kind != NodeKind::identifier && argument->kind != NodeKind::keyword_argument) {
          error("expected identifier for parameter declaration");
        }
        if (!names.insert(argument->text).second) error("duplicate parameter name: " + argument->text);
      }
      if (argument->kind == NodeKind::keyword_argument) {
        saw_keyword = true;
      } else if (saw_keyword) {
        error(parameters ? "non-default argument follows default argument"
                         : "positional arguments must come before keyword arguments");
      } else if (saw_spread) {
        error("positional arguments must not follow `*` argument unpacking");
      }
    }
    args.push_back(std::move(argument));
    if (is(T::comma)) ++current_;
  }
  expect(T::close_paren, "expected ')'");
  return args;
}

NodePtr Parser::parse_member_arguments() {
  uint32_t offset = offset_here();
  std::vector<NodePtr> slices;
  bool is_slice = false;
  while (!is(T::close_square_bracket)) {
    if (current_ >= tokens_.size()) error("unexpected end of template, expected ']'");
    if (is(T::colon)) {
      slices.push_back(nullptr);
      ++current_;
      is_slice = true;
    } else {
      slices.push_back(parse_expression());
      if (is(T::colon)) {
        ++current_;
        is_slice = true;
      }
    }
  }
  if (slices.empty()) error("expected at least one argument for member/slice expression");
  if (!is_slice) return std::move(slices[0]);
  if (slices.size() > 3) error("expected 0-3 arguments for slice expression");
  NodePtr node = make(NodeKind::slice, offset);
  node->a = std::move(slices[0]);
  if (slices.size() > 1) node->b = std::move(slices[1]);
  if (slices.size() > 2) node->c = std::move(slices[2]);
  return node;
}

NodePtr Parser::parse_member(NodePtr object) {
  Chain chain(*this);
  while (is(T::dot) || is(T::open_square_bracket)) {
    chain.wrap();
    const Token& op = next();
    NodePtr node = make(NodeKind::member, op.offset);
    node->flag = op.type == T::open_square_bracket;
    if (node->flag) {
      Deeper guard(*this);
      node->b = parse_member_arguments();
      expect(T::close_square_bracket, "expected ']'");
    } else {
      node->b = parse_primary();
      if (node->b->kind != NodeKind::identifier && node->b->kind != NodeKind::integer_literal) {
        error("expected identifier or integer following '.'");
      }
    }
    node->a = std::move(object);
    object = std::move(node);
  }
  return object;
}

NodePtr Parser::parse_primary() {
  Deeper guard(*this);
  const Token& token = next();
  switch (token.type) {
    case T::numeric_literal: {
      bool is_float = token.value.find('.') != std::string::npos;
      NodePtr node = make(is_float ? NodeKind::float_literal : NodeKind::integer_literal, token.offset);
      if (is_float) {
        node->number = std::strtod(token.value.c_str(), nullptr);
      } else {
        errno = 0;
        node->integer = std::strtoll(token.value.c_str(), nullptr, 10);
        if (errno == ERANGE) error("integer literal out of range: " + token.value);
      }
      return node;
    }
    case T::string_literal: {
      NodePtr node = make(NodeKind::string_literal, token.offset);
      node->text = token.value;
      while (is(T::string_literal)) node->text += next().value;
      return node;
    }
    case T::identifier: {
      NodePtr node = make(NodeKind::identifier, token.offset);
      node->text = token.value;
      return node;
    }
    case T::open_paren: {
      NodePtr expression = parse_expression_sequence(false);
      expect(T::close_paren, "expected ')'");
      return expression;
    }
    case T::open_square_bracket: {
      NodePtr node = make(NodeKind::array_literal, token.offset);
      while (!is(T::close_square_bracket)) {
        if (current_ >= tokens_.size()) error("unexpected end of template, expected ']'");
        node->items.push_back(parse_expression());
        if (is(T::comma)) ++current_;
      }
      ++current_;
      return node;
    }
    case T::open_curly_bracket: {
      NodePtr node = make(NodeKind::object_literal, token.offset);
      while (!is(T::close_curly_bracket)) {
        if (current_ >= tokens_.size()) error("unexpected end of template, expected '}'");
        node->items.push_back(parse_expression());
        expect(T::colon, "expected ':' between key and value in object literal");
        node->items.push_back(parse_expression());
        if (is(T::comma)) ++current_;
      }
      ++current_;
      return node;
    }
    default:
      --current_;
      error(std::string("unexpected token ") + token_type_name(token.type) + " '" + token.value + "'");
  }
}

}  // namespace

NodeList parse(const std::vector<Token>& tokens, std::string_view source, const ParseLimits& limits) {
  Parser parser(tokens, source, limits);
  return parser.run();
}

}  // namespace flare::text::jinja
