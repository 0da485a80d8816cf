// Tree-walking interpreter for chat templates, following @huggingface/jinja's semantics
// (scoping, loop variables, filters, tests, string and dict methods). Every evaluation step,
// nesting level, output byte and collection size is counted against RenderLimits so that a
// hostile template fails with an Error instead of hanging or exhausting memory.
// One Interpreter renders once, on the calling thread; it owns nothing shared.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace flare::text::jinja {

struct RenderLimits {
  uint64_t max_steps = 10'000'000;          // evaluated nodes
  int max_depth = 500;                      // nested evaluations, including macro calls
  size_t max_output_bytes = 16u << 20;      // any one rendered string
  size_t max_items = 1'000'000;             // any one list (range, concatenation, split)
  uint64_t max_work_bytes = 512ull << 20;   // bytes copied into new strings and lists, in total
};

struct Environment {
  std::unordered_map<std::string, Value> variables;
  std::shared_ptr<Environment> parent;

  Value lookup(const std::string& name) const;
  void set(const std::string& name, Value value) { variables[name] = std::move(value); }
};
using EnvPtr = std::shared_ptr<Environment>;

// Thrown inside the interpreter; run() turns it into flare::Error with line and column.
struct TemplateError {
  std::string message;
};
[[noreturn]] void template_error(std::string message);

class Interpreter {
 public:
  Interpreter(std::string_view source, const RenderLimits& limits) : source_(source), limits_(limits) {}
  ~Interpreter();

  // Renders `program` with `globals` as the outermost scope.
  std::string run(const NodeList& program, const EnvPtr& globals);

  Value call(const Value& function, CallArgs& args, const EnvPtr& scope);
  void check_string(size_t n_bytes) const;
  void check_items(size_t n_items) const;
  // Charges copying work against max_work_bytes: steps alone do not bound time when each
  // step may copy a string of max_output_bytes.
  void charge(uint64_t n_bytes);
  void charge(const Value& produced);
  // Namespaces are tracked so that cycles built through them are broken after rendering.
  Value make_namespace(ValueMap entries);

 private:
  void exec_block(const NodeList& body, const EnvPtr& env, std::string& out);
  void exec(const Node& node, const EnvPtr& env, std::string& out);
  void exec_set(const Node& node, const EnvPtr& env);
  void exec_for(const Node& node, const EnvPtr& env, std::string& out);
  void exec_macro(const Node& node, const EnvPtr& env);
  void exec_call_statement(const Node& node, const EnvPtr& env, std::string& out);
  void append(std::string& out, const Value& value);

  Value eval(const Node& node, const EnvPtr& env);
  Value eval_inner(const Node& node, const EnvPtr& env);
  Value eval_binary(const Node& node, const EnvPtr& env);
  Value eval_arithmetic(const std::string& op, const Value& left, const Value& right);
  Value eval_unary(const Node& node, const EnvPtr& env);
  Value eval_member(const Node& node, const EnvPtr& env);
  Value eval_slice(const Value& object, const Node& slice, const EnvPtr& env);
  Value eval_call(const Node& node, const EnvPtr& env);
  CallArgs eval_arguments(const NodeList& args, const EnvPtr& env);
  void bind_macro_arguments(const Node& definition, const NodeList& parameters, CallArgs args, const EnvPtr& scope);

  // filters.cpp
  Value apply_filter(const Value& operand, const Node& filter, const EnvPtr& env);
  Value apply_simple_filter(const Value& operand, const std::string& name, const EnvPtr& env);
  Value apply_call_filter(const Value& operand, const std::string& name, const Node& call, const EnvPtr& env);
  Value apply_list_filter(const Value& operand, const std::string& name, CallArgs& args, const EnvPtr& env);
  Value simple_list_filter(const Value& operand, const std::string& name, const EnvPtr& env);
  Value tojson_filter(const Value& operand, const CallArgs& args);
  bool apply_test(const std::string& name, const Value& operand, const Value* argument);
  Value member_of(const Value& object, const std::string& name);

  std::string_view source_;
  RenderLimits limits_;
  uint64_t n_steps_ = 0;
  uint64_t n_work_bytes_ = 0;
  int depth_ = 0;
  uint32_t offset_ = 0;  // source offset of the node being evaluated
  std::vector<Value> namespaces_;
};

// The globals every render starts with: true/false/none (and title-case forms),
// raise_exception, range, strftime_now, namespace.
EnvPtr make_global_environment();

}  // namespace flare::text::jinja
