// Syntax tree of a chat template: one node type with a kind tag and a few child slots.
// Which slots a kind uses is listed beside it; `offset` is the byte offset in the source
// of the token that started the node (for "line L, column C" in errors).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace flare::text::jinja {

enum class NodeKind : uint8_t {
  // statements
  text,            // text: literal output
  comment,
  set,             // a: assignee, b: value (null for a block set), body
  if_,             // a: test, body, alternate
  for_,            // a: loop variable, b: iterable, body, alternate (else block)
  macro,           // text: name, items: parameters, body
  call_statement,  // a: call expression, items: caller parameters, body
  filter_statement,  // a: filter (identifier or call), body
  break_,
  continue_,
  // expressions
  integer_literal,  // integer
  float_literal,    // number
  string_literal,   // text
  identifier,       // text
  array_literal,    // items
  tuple_literal,    // items
  object_literal,   // items: key, value, key, value...
  member,           // a: object, b: property, flag: computed ([...])
  call,             // a: callee, items: arguments
  slice,            // a: start, b: stop, c: step (each may be null)
  keyword_argument,  // text: name, a: value
  spread,           // a: value (*args)
  keyword_spread,   // a: value (**kwargs)
  binary,           // text: operator, a: left, b: right
  unary,            // text: operator, a: operand
  filter,           // a: operand, b: filter (identifier or call)
  test,             // a: operand, text: test name, flag: negated
  select,           // a: value, b: condition (`x if c` without else)
  ternary,          // a: condition, b: if true, c: if false
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using NodeList = std::vector<NodePtr>;

struct Node {
  NodeKind kind;
  uint32_t offset = 0;
  std::string text;
  int64_t integer = 0;
  double number = 0.0;
  bool flag = false;
  NodePtr a, b, c;
  NodeList items;
  NodeList body;
  NodeList alternate;

  Node(NodeKind node_kind, uint32_t source_offset) : kind(node_kind), offset(source_offset) {}
};

}  // namespace flare::text::jinja
