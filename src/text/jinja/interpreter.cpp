// Interpreter for chat templates: statements, expressions, scoping and macros (see
// interpreter.h). Filters, tests and builtin methods live in filters.cpp.
#include "text/jinja/interpreter.h"

#include <cmath>
#include <limits>
#include <optional>

#include "common/error.h"
#include "text/jinja/lexer.h"
#include "text/jinja/utf8.h"

namespace flare::text::jinja {

namespace {
struct BreakSignal {};
struct ContinueSignal {};

bool mentions_identifier(const Node& node, std::string_view name) {
  if (node.kind == NodeKind::identifier && node.text == name) return true;
  for (const Node* child : {node.a.get(), node.b.get(), node.c.get()}) {
    if (child && mentions_identifier(*child, name)) return true;
  }
  for (const NodeList* list : {&node.items, &node.body, &node.alternate}) {
    for (const NodePtr& child : *list) {
      if (child && mentions_identifier(*child, name)) return true;
    }
  }
  return false;
}

bool body_mentions(const NodeList& body, std::string_view name) {
  for (const NodePtr& node : body) {
    if (mentions_identifier(*node, name)) return true;
  }
  return false;
}

// Python-style slice bounds as the reference computes them.
std::vector<size_t> slice_indices(size_t length, std::optional<int64_t> start, std::optional<int64_t> stop, int64_t step) {
  int64_t n = static_cast<int64_t>(length);
  std::vector<size_t> indices;
  if (step >= 0) {
    int64_t s = start.value_or(0), e = stop.value_or(n);
    s = s < 0 ? std::max<int64_t>(n + s, 0) : std::min(s, n);
    e = e < 0 ? std::max<int64_t>(n + e, 0) : std::min(e, n);
    if (step == 0) return indices;
    for (int64_t i = s; i < e; i += step) indices.push_back(static_cast<size_t>(i));
  } else {
    int64_t s = start.value_or(n - 1), e = stop.value_or(-1);
    s = s < 0 ? std::max<int64_t>(n + s, -1) : std::min(s, n - 1);
    e = e < -1 ? std::max<int64_t>(n + e, -1) : std::min(e, n - 1);
    for (int64_t i = s; i > e; i += step) indices.push_back(static_cast<size_t>(i));
  }
  return indices;
}
}  // namespace

void template_error(std::string message) { throw TemplateError{std::move(message)}; }

Value Environment::lookup(const std::string& name) const {
  for (const Environment* env = this; env; env = env->parent.get()) {
    auto it = env->variables.find(name);
    if (it != env->variables.end()) return it->second;
  }
  return Value();
}

// Namespaces can form cycles (ns.self = ns). Clearing them while namespaces_ still holds
// every namespace breaks the cycles, and destroying their contents never recurses into a
// namespace, so destruction depth stays within the recorded depth of lists and maps.
Interpreter::~Interpreter() {
  for (const Value& ns : namespaces_) ns.as_map().clear();
}

Value Interpreter::make_namespace(ValueMap entries) {
  Value ns = Value::name_space(std::move(entries));
  namespaces_.push_back(ns);
  return ns;
}

void Interpreter::check_string(size_t n_bytes) const {
  if (n_bytes > limits_.max_output_bytes) {
    template_error(fmt::format("output exceeds the limit of {} bytes", limits_.max_output_bytes));
  }
}

void Interpreter::check_items(size_t n_items) const {
  if (n_items > limits_.max_items) template_error(fmt::format("list exceeds the limit of {} items", limits_.max_items));
}

void Interpreter::charge(uint64_t n_bytes) {
  n_work_bytes_ += n_bytes;
  if (n_work_bytes_ > limits_.max_work_bytes) {
    template_error(fmt::format("template copied more than {} bytes", limits_.max_work_bytes));
  }
}

void Interpreter::charge(const Value& produced) {
  if (produced.is_string()) charge(produced.as_string().size());
  if (produced.is_list()) charge(produced.as_list().size() * sizeof(Value));
}

std::string Interpreter::run(const NodeList& program, const EnvPtr& globals) {
  try {
    std::string out;
    exec_block(program, globals, out);
    return out;
  } catch (const TemplateError& e) {
    SourcePos pos = position_of(source_, offset_);
    fail_input("chat template error at line {}, column {}: {}", pos.line, pos.column, e.message);
  } catch (const BreakSignal&) {
    fail_input("chat template error: 'break' outside of a loop");
  } catch (const ContinueSignal&) {
    fail_input("chat template error: 'continue' outside of a loop");
  } catch (const Error& e) {
    SourcePos pos = position_of(source_, offset_);
    fail_input("chat template error at line {}, column {}: {}", pos.line, pos.column, e.what());
  }
}

Value Interpreter::call(const Value& function, CallArgs& args, const EnvPtr& scope) {
  if (!function.is_function()) template_error(fmt::format("Cannot call something that is not a function: got {}", function.type_name()));
  return function.as_function()(args, *this, scope);
}

// ---- statements ----

void Interpreter::exec_block(const NodeList& body, const EnvPtr& env, std::string& out) {
  for (const NodePtr& node : body) exec(*node, env, out);
}

void Interpreter::append(std::string& out, const Value& value) {
  if (value.is_none() || value.is_undefined()) return;
  if (value.is_string()) {
    charge(value.as_string().size());
    check_string(out.size() + value.as_string().size());
    out += value.as_string();
  } else {
    std::string text = to_output_string(value, limits_.max_output_bytes);
    charge(text.size());
    check_string(out.size() + text.size());
    out += text;
  }
}

void Interpreter::exec(const Node& node, const EnvPtr& env, std::string& out) {
  if (++n_steps_ > limits_.max_steps) template_error(fmt::format("template exceeded {} evaluation steps", limits_.max_steps));
  offset_ = node.offset;
  switch (node.kind) {
    case NodeKind::text:
      charge(node.text.size());
      check_string(out.size() + node.text.size());
      out += node.text;
      return;
    case NodeKind::comment: return;
    case NodeKind::set: exec_set(node, env); return;
    case NodeKind::if_: {
      bool test = eval(*node.a, env).truthy();
      exec_block(test ? node.body : node.alternate, env, out);
      return;
    }
    case NodeKind::for_: exec_for(node, env, out); return;
    case NodeKind::macro: exec_macro(node, env); return;
    case NodeKind::call_statement: exec_call_statement(node, env, out); return;
    case NodeKind::filter_statement: {
      std::string body;
      exec_block(node.body, env, body);
      append(out, apply_filter(Value::string(std::move(body)), *node.a, env));
      return;
    }
    case NodeKind::break_: throw BreakSignal{};
    case NodeKind::continue_: throw ContinueSignal{};
    default: append(out, eval(node, env));
  }
}

void Interpreter::exec_set(const Node& node, const EnvPtr& env) {
  Value rhs;
  if (node.b) {
    rhs = eval(*node.b, env);
  } else {
    std::string body;
    exec_block(node.body, env, body);
    rhs = Value::string(std::move(body));
  }
  const Node& target = *node.a;
  offset_ = node.offset;
  if (target.kind == NodeKind::identifier) {
    env->set(target.text, std::move(rhs));
  } else if (target.kind == NodeKind::tuple_literal) {
    if (!rhs.is_list()) template_error(fmt::format("Cannot unpack non-iterable type in set: {}", rhs.type_name()));
    const ValueList& values = rhs.as_list();
    if (values.size() != target.items.size()) {
      template_error(fmt::format("Too {} items to unpack in set", target.items.size() > values.size() ? "few" : "many"));
    }
    for (size_t i = 0; i < values.size(); ++i) {
      if (target.items[i]->kind != NodeKind::identifier) template_error("Cannot unpack to non-identifier in set");
      env->set(target.items[i]->text, values[i]);
    }
  } else if (target.kind == NodeKind::member) {
    Value object = eval(*target.a, env);
    if (!object.is_namespace()) template_error("cannot assign attribute on non-namespace object");
    if (target.b->kind != NodeKind::identifier) template_error("Cannot assign to member with non-identifier property");
    if (rhs.depth() + 1 > k_max_value_depth) template_error(fmt::format("value nested deeper than {} levels", k_max_value_depth));
    object.as_map().raise_depth(rhs.depth() + 1);
    object.as_map().set(target.b->text, std::move(rhs));
  } else {
    template_error("Invalid left-hand side in set");
  }
}

void Interpreter::exec_for(const Node& node, const EnvPtr& env, std::string& out) {
  auto scope = std::make_shared<Environment>();
  scope->parent = env;
  const Node* test = nullptr;
  Value iterable;
  if (node.b->kind == NodeKind::select) {
    iterable = eval(*node.b->a, scope);
    test = node.b->b.get();
  } else {
    iterable = eval(*node.b, scope);
  }
  offset_ = node.offset;
  if (iterable.is_map()) {
    ValueList keys;
    for (const auto& entry : iterable.as_map().entries()) keys.push_back(Value::string(entry.first));
    iterable = Value::list(std::move(keys));
  }
  if (!iterable.is_list()) template_error(fmt::format("Expected iterable or object type in for loop: got {}", iterable.type_name()));

  const Node& loop_var = *node.a;
  auto bind = [&](const EnvPtr& target, const Value& current) {
    if (loop_var.kind == NodeKind::identifier) {
      target->set(loop_var.text, current);
      return;
    }
    if (!current.is_list()) template_error(fmt::format("Cannot unpack non-iterable type: {}", current.type_name()));
    const ValueList& parts = current.as_list();
    if (parts.size() != loop_var.items.size()) {
      template_error(fmt::format("Too {} items to unpack", loop_var.items.size() > parts.size() ? "few" : "many"));
    }
    for (size_t j = 0; j < parts.size(); ++j) {
      if (loop_var.items[j]->kind != NodeKind::identifier) template_error("Cannot unpack non-identifier type");
      target->set(loop_var.items[j]->text, parts[j]);
    }
  };

  charge(iterable);
  ValueList items;
  for (const Value& current : iterable.as_list()) {
    if (test) {
      auto loop_scope = std::make_shared<Environment>();
      loop_scope->parent = scope;
      bind(loop_scope, current);
      if (!eval(*test, loop_scope).truthy()) continue;
    }
    items.push_back(current);
  }

  bool no_iteration = true;
  size_t n = items.size();
  for (size_t i = 0; i < n; ++i) {
    ValueMap loop;
    loop.reserve(9);
    loop.set("index", Value::integer(static_cast<int64_t>(i + 1)));
    loop.set("index0", Value::integer(static_cast<int64_t>(i)));
    loop.set("revindex", Value::integer(static_cast<int64_t>(n - i)));
    loop.set("revindex0", Value::integer(static_cast<int64_t>(n - i - 1)));
    loop.set("first", Value::boolean(i == 0));
    loop.set("last", Value::boolean(i == n - 1));
    loop.set("length", Value::integer(static_cast<int64_t>(n)));
    loop.set("previtem", i > 0 ? items[i - 1] : Value());
    loop.set("nextitem", i + 1 < n ? items[i + 1] : Value());
    scope->set("loop", Value::map(std::move(loop)));
    bind(scope, items[i]);
    std::string body;
    try {
      exec_block(node.body, scope, body);
    } catch (const ContinueSignal&) {
      continue;
    } catch (const BreakSignal&) {
      break;
    }
    charge(body.size());
    check_string(out.size() + body.size());
    out += body;
    no_iteration = false;
  }
  if (no_iteration) exec_block(node.alternate, scope, out);
}

void Interpreter::bind_macro_arguments(const Node& definition, const NodeList& parameters, CallArgs args,
                                       const EnvPtr& scope) {
  bool wants_kwargs = body_mentions(definition.body, "kwargs");
  bool wants_varargs = body_mentions(definition.body, "varargs");
  std::string display_name = definition.kind == NodeKind::macro ? "'" + definition.text + "'" : "None";
  std::vector<std::pair<std::string, const Node*>> pending_defaults;
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Node& parameter = *parameters[i];
    const std::string& name = parameter.text;
    const Node* default_value = parameter.kind == NodeKind::keyword_argument ? parameter.a.get() : nullptr;
    std::optional<Value> value;
    if (i < args.positional.size()) value = args.positional[i];
    if (!value) {
      for (auto it = args.keywords.begin(); it != args.keywords.end(); ++it) {
        if (it->first == name) {
          value = it->second;
          args.keywords.erase(it);
          break;
        }
      }
    }
    if (!value && default_value) pending_defaults.emplace_back(name, default_value);
    scope->set(name, value.value_or(Value()));
  }
  if (wants_kwargs) {
    ValueMap kwargs;
    for (auto& [key, value] : args.keywords) kwargs.set(key, value);
    scope->set("kwargs", Value::map(std::move(kwargs)));
  } else if (!args.keywords.empty()) {
    template_error(fmt::format("macro {} takes no keyword argument '{}'", display_name, args.keywords.front().first));
  }
  if (wants_varargs) {
    ValueList rest;
    for (size_t i = parameters.size(); i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    scope->set("varargs", Value::list(std::move(rest)));
  } else if (args.positional.size() > parameters.size()) {
    template_error(fmt::format("macro {} takes not more than {} argument(s)", display_name, parameters.size()));
  }
  for (const auto& [name, expression] : pending_defaults) scope->set(name, eval(*expression, scope));
}

void Interpreter::exec_macro(const Node& node, const EnvPtr& env) {
  const Node* definition = &node;
  env->set(node.text, Value::function([definition](CallArgs& args, Interpreter& self, const EnvPtr& scope) {
    auto macro_scope = std::make_shared<Environment>();
    macro_scope->parent = scope;
    self.bind_macro_arguments(*definition, definition->items, std::move(args), macro_scope);
    std::string body;
    self.exec_block(definition->body, macro_scope, body);
    return Value::string(std::move(body));
  }));
}

void Interpreter::exec_call_statement(const Node& node, const EnvPtr& env, std::string& out) {
  const Node* definition = &node;
  Value caller = Value::function([definition, env](CallArgs& args, Interpreter& self, const EnvPtr&) {
    auto block_scope = std::make_shared<Environment>();
    block_scope->parent = env;
    self.bind_macro_arguments(*definition, definition->items, std::move(args), block_scope);
    std::string body;
    self.exec_block(definition->body, block_scope, body);
    return Value::string(std::move(body));
  });
  const Node& call_node = *node.a;
  CallArgs args = eval_arguments(call_node.items, env);
  Value function = eval(*call_node.a, env);
  auto call_scope = std::make_shared<Environment>();
  call_scope->parent = env;
  call_scope->set("caller", caller);
  append(out, call(function, args, call_scope));
}

// ---- expressions ----

Value Interpreter::eval(const Node& node, const EnvPtr& env) {
  if (++n_steps_ > limits_.max_steps) template_error(fmt::format("template exceeded {} evaluation steps", limits_.max_steps));
  if (++depth_ > limits_.max_depth) template_error(fmt::format("template nested deeper than {} levels", limits_.max_depth));
  uint32_t saved = offset_;
  offset_ = node.offset;
  Value result = eval_inner(node, env);
  offset_ = saved;  // on error offset_ keeps the innermost failing node
  --depth_;
  return result;
}

Value Interpreter::eval_inner(const Node& node, const EnvPtr& env) {
  switch (node.kind) {
    case NodeKind::integer_literal: return Value::integer(node.integer);
    case NodeKind::float_literal: return Value::floating(node.number);
    case NodeKind::string_literal:
    case NodeKind::text: return Value::string(node.text);
    case NodeKind::identifier: return env->lookup(node.text);
    case NodeKind::array_literal:
    case NodeKind::tuple_literal: {
      ValueList items;
      for (const NodePtr& item : node.items) items.push_back(eval(*item, env));
      return Value::list(std::move(items), node.kind == NodeKind::tuple_literal);
    }
    case NodeKind::object_literal: {
      ValueMap map;
      for (size_t i = 0; i + 1 < node.items.size(); i += 2) {
        Value key = eval(*node.items[i], env);
        if (!key.is_string()) template_error(fmt::format("Object keys must be strings: got {}", key.type_name()));
        map.set(key.as_string(), eval(*node.items[i + 1], env));
      }
      return Value::map(std::move(map));
    }
    case NodeKind::member: return eval_member(node, env);
    case NodeKind::call: return eval_call(node, env);
    case NodeKind::binary: return eval_binary(node, env);
    case NodeKind::unary: return eval_unary(node, env);
    case NodeKind::filter: {
      Value result = apply_filter(eval(*node.a, env), *node.b, env);
      charge(result);
      return result;
    }
    case NodeKind::test: {
      Value operand = eval(*node.a, env);
      bool result = apply_test(node.text, operand, nullptr);
      return Value::boolean(node.flag ? !result : result);
    }
    case NodeKind::select: {
      if (!eval(*node.b, env).truthy()) return Value();
      return eval(*node.a, env);
    }
    case NodeKind::ternary: return eval(*node.a, env).truthy() ? eval(*node.b, env) : eval(*node.c, env);
    case NodeKind::comment: return Value::none();
    default: template_error("statement used where an expression was expected");
  }
}

Value Interpreter::eval_binary(const Node& node, const EnvPtr& env) {
  const std::string& op = node.text;
  Value left = eval(*node.a, env);
  if (op == "and") return left.truthy() ? eval(*node.b, env) : left;
  if (op == "or") return left.truthy() ? left : eval(*node.b, env);
  Value right = eval(*node.b, env);
  if (op == "==") return Value::boolean(loose_equal(left, right));
  if (op == "!=") return Value::boolean(!loose_equal(left, right));
  if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && (op == "in" || op == "not in")) return Value::boolean(op == "not in");
    template_error(fmt::format("Cannot perform operation {} on undefined values", op));
  }
  if (left.is_none() || right.is_none()) template_error("Cannot perform operation on null values");
  if (op == "~") {
    std::string text = to_js_string(left, limits_.max_output_bytes) + to_js_string(right, limits_.max_output_bytes);
    charge(text.size());
    check_string(text.size());
    return Value::string(std::move(text));
  }
  bool left_numeric = left.is_number() || left.kind() == ValueKind::boolean;
  bool right_numeric = right.is_number() || right.kind() == ValueKind::boolean;
  if (op == "**" && left_numeric && right_numeric) return eval_arithmetic(op, left, right);
  if (left.is_number() && right.is_number()) {
    if (op == "<") return Value::boolean(left.as_number() < right.as_number());
    if (op == ">") return Value::boolean(left.as_number() > right.as_number());
    if (op == "<=") return Value::boolean(left.as_number() <= right.as_number());
    if (op == ">=") return Value::boolean(left.as_number() >= right.as_number());
    if (op == "+" || op == "-" || op == "*" || op == "/" || op == "//" || op == "%") {
      return eval_arithmetic(op, left, right);
    }
  } else if (left.is_list() && right.is_list()) {
    if (op == "+") {
      check_items(left.as_list().size() + right.as_list().size());
      charge((left.as_list().size() + right.as_list().size()) * sizeof(Value));
      ValueList joined = left.as_list();
      joined.insert(joined.end(), right.as_list().begin(), right.as_list().end());
      return Value::list(std::move(joined));
    }
  } else if (right.is_list() && (op == "in" || op == "not in")) {
    bool member = false;
    for (const Value& item : right.as_list()) {
      if (strict_equal(item, left)) {
        member = true;
        break;
      }
    }
    return Value::boolean(op == "in" ? member : !member);
  }
  if ((left.is_string() || right.is_string()) && op == "+") {
    std::string text = to_js_string(left, limits_.max_output_bytes) + to_js_string(right, limits_.max_output_bytes);
    charge(text.size());
    check_string(text.size());
    return Value::string(std::move(text));
  }
  if (left.is_string() && right.is_string() && (op == "in" || op == "not in")) {
    bool found = right.as_string().find(left.as_string()) != std::string::npos;
    return Value::boolean(op == "in" ? found : !found);
  }
  if (left.is_string() && right.is_map() && (op == "in" || op == "not in")) {
    bool found = right.as_map().find(left.as_string()) != nullptr;
    return Value::boolean(op == "in" ? found : !found);
  }
  template_error(fmt::format("Unknown operator \"{}\" between {} and {}", op, left.type_name(), right.type_name()));
}

Value Interpreter::eval_arithmetic(const std::string& op, const Value& left, const Value& right) {
  bool is_float = left.kind() == ValueKind::floating || right.kind() == ValueKind::floating;
  double a = left.as_number(), b = right.as_number();
  if (op == "**") {
    if (a == 0 && b < 0) template_error("0.0 cannot be raised to a negative power");
    double result = std::pow(a, b);
    if (!std::isfinite(result)) template_error("Exponentiation result is not a finite real number");
    if (is_float || b < 0) return Value::floating(result);
    if (std::fabs(result) >= 9.2e18) template_error("integer overflow");
    return Value::integer(static_cast<int64_t>(result));
  }
  if (op == "/") {
    if (b == 0) template_error("division by zero");
    return Value::floating(a / b);
  }
  if (is_float) {
    if ((op == "//" || op == "%") && b == 0) template_error("division by zero");
    if (op == "+") return Value::floating(a + b);
    if (op == "-") return Value::floating(a - b);
    if (op == "*") return Value::floating(a * b);
    if (op == "//") return Value::floating(std::floor(a / b));
    return Value::floating(std::fmod(a, b));
  }
  int64_t x = left.as_int(), y = right.as_int(), result = 0;
  bool overflow = false;
  if (op == "+") overflow = __builtin_add_overflow(x, y, &result);
  if (op == "-") overflow = __builtin_sub_overflow(x, y, &result);
  if (op == "*") overflow = __builtin_mul_overflow(x, y, &result);
  if (op == "//" || op == "%") {
    if (y == 0) template_error("division by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1) template_error("integer overflow");
    if (op == "%") return Value::integer(x % y);  // JavaScript remainder keeps the dividend's sign
    int64_t quotient = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --quotient;
    return Value::integer(quotient);
  }
  if (overflow) template_error("integer overflow");
  return Value::integer(result);
}

Value Interpreter::eval_unary(const Node& node, const EnvPtr& env) {
  Value argument = eval(*node.a, env);
  if (node.text == "not") return Value::boolean(!argument.truthy());
  int64_t sign = node.text == "-" ? -1 : 1;
  switch (argument.kind()) {
    case ValueKind::floating: return Value::floating(static_cast<double>(sign) * argument.as_number());
    case ValueKind::integer:
      if (argument.as_int() == std::numeric_limits<int64_t>::min()) template_error("integer overflow");
      return Value::integer(sign * argument.as_int());
    case ValueKind::boolean: return Value::integer(sign * (argument.as_bool() ? 1 : 0));
    default: template_error(fmt::format("Unknown operator \"{}\" for {}", node.text, argument.type_name()));
  }
}

Value Interpreter::eval_slice(const Value& object, const Node& slice, const EnvPtr& env) {
  if (!object.is_list() && !object.is_string()) template_error("Slice object must be an array or string");
  auto bound = [&](const NodePtr& part, const char* what) -> std::optional<int64_t> {
    if (!part) return std::nullopt;
    Value value = eval(*part, env);
    if (value.is_undefined()) return std::nullopt;
    if (value.kind() != ValueKind::integer) template_error(fmt::format("Slice {} must be numeric or undefined", what));
    return value.as_int();
  };
  auto start = bound(slice.a, "start");
  auto stop = bound(slice.b, "stop");
  int64_t step = bound(slice.c, "step").value_or(1);
  if (object.is_list()) {
    const ValueList& items = object.as_list();
    ValueList result;
    for (size_t i : slice_indices(items.size(), start, stop, step)) result.push_back(items[i]);
    return Value::list(std::move(result));
  }
  std::vector<std::string> chars = utf8_chars(object.as_string());
  std::string result;
  for (size_t i : slice_indices(chars.size(), start, stop, step)) result += chars[i];
  return Value::string(std::move(result));
}

Value Interpreter::eval_member(const Node& node, const EnvPtr& env) {
  Value object = eval(*node.a, env);
  Value property;
  if (node.flag) {
    if (node.b->kind == NodeKind::slice) {
      Value result = eval_slice(object, *node.b, env);
      charge(result);
      return result;
    }
    property = eval(*node.b, env);
  } else if (node.b->kind == NodeKind::integer_literal) {
    property = Value::integer(node.b->integer);
  } else {
    property = Value::string(node.b->text);
  }
  if (object.is_attribute_container()) {
    if (!property.is_string()) template_error(fmt::format("Cannot access property with non-string: got {}", property.type_name()));
    if (const Value* found = object.as_map().find(property.as_string())) return *found;
    return object.is_map() ? member_of(object, property.as_string()) : Value();
  }
  if (object.is_list() || object.is_string()) {
    if (property.kind() == ValueKind::integer) {
      int64_t index = property.as_int();
      if (object.is_list()) {
        int64_t n = static_cast<int64_t>(object.as_list().size());
        if (index < 0) index += n;
        return index >= 0 && index < n ? object.as_list()[static_cast<size_t>(index)] : Value();
      }
      charge(object.as_string().size());
      std::vector<std::string> chars = utf8_chars(object.as_string());
      int64_t n = static_cast<int64_t>(chars.size());
      if (index < 0) index += n;
      return index >= 0 && index < n ? Value::string(chars[static_cast<size_t>(index)]) : Value();
    }
    if (property.is_string()) return member_of(object, property.as_string());
    template_error(fmt::format("Cannot access property with non-string/non-number: got {}", property.type_name()));
  }
  if (!property.is_string()) template_error(fmt::format("Cannot access property with non-string: got {}", property.type_name()));
  return Value();
}

CallArgs Interpreter::eval_arguments(const NodeList& args, const EnvPtr& env) {
  CallArgs result;
  for (const NodePtr& argument : args) {
    if (argument->kind == NodeKind::spread) {
      Value value = eval(*argument->a, env);
      if (!value.is_list()) template_error(fmt::format("Cannot unpack non-iterable type: {}", value.type_name()));
      for (const Value& item : value.as_list()) result.positional.push_back(item);
    } else if (argument->kind != NodeKind::keyword_argument && argument->kind != NodeKind::keyword_spread) {
      result.positional.push_back(eval(*argument, env));
    }
  }
  auto add_keyword = [&](const std::string& key, Value value) {
    if (result.keyword(key)) template_error(fmt::format("Got multiple values for keyword argument '{}'", key));
    result.keywords.emplace_back(key, std::move(value));
  };
  for (const NodePtr& argument : args) {
    if (argument->kind == NodeKind::keyword_argument) {
      add_keyword(argument->text, eval(*argument->a, env));
    } else if (argument->kind == NodeKind::keyword_spread) {
      Value value = eval(*argument->a, env);
      if (!value.is_map()) template_error(fmt::format("Argument after ** must be a mapping, not {}", value.type_name()));
      for (const auto& [key, item] : value.as_map().entries()) add_keyword(key, item);
    }
  }
  return result;
}

Value Interpreter::eval_call(const Node& node, const EnvPtr& env) {
  CallArgs args = eval_arguments(node.items, env);
  Value function = eval(*node.a, env);
  offset_ = node.offset;
  Value result = call(function, args, env);
  charge(result);
  return result;
}

}  // namespace flare::text::jinja
