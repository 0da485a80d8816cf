// The chat-template interpreter's value model: a small variant (undefined, none, bool, int,
// float, string, list, map with insertion order, callable, namespace). Containers and strings
// are shared by reference, as in the reference renderer (@huggingface/jinja), so copying a
// Value is cheap. Printing and JSON follow that renderer's JavaScript semantics.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace flare::text::jinja {

class Value;
struct Environment;

constexpr int k_max_value_depth = 500;
class Interpreter;

using ValueList = std::vector<Value>;

// Insertion-ordered string-keyed map.
class ValueMap {
 public:
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
  bool erase(std::string_view key);
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  void clear();
  void reserve(size_t n_entries) { entries_.reserve(n_entries); }
  // Nesting depth of a namespace's contents (namespaces are the only mutable containers).
  int depth() const { return depth_; }
  void raise_depth(int depth) { depth_ = std::max(depth_, depth); }

 private:
  static constexpr size_t k_index_threshold = 12;
  int depth_ = 1;
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;  // empty while the map is small
};

struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keywords;
  const Value* keyword(std::string_view name) const;
};

// A callable: a builtin, a bound string/dict method, a macro or a call block's `caller`.
using NativeFunction = std::function<Value(CallArgs& args, Interpreter& interpreter,
                                           const std::shared_ptr<Environment>& scope)>;

enum class ValueKind : uint8_t {
  undefined, none, boolean, integer, floating, string, list, map, function, name_space,
};

class Value {
 public:
  Value() = default;  // undefined
  static Value none();
  static Value boolean(bool value);
  static Value integer(int64_t value);
  static Value floating(double value);
  static Value string(std::string value);
  static Value list(ValueList items, bool is_tuple = false);
  static Value map(ValueMap entries);
  static Value name_space(ValueMap entries);
  static Value function(NativeFunction function);

  ValueKind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == ValueKind::undefined; }
  bool is_none() const { return kind_ == ValueKind::none; }
  bool is_string() const { return kind_ == ValueKind::string; }
  bool is_list() const { return kind_ == ValueKind::list; }
  bool is_map() const { return kind_ == ValueKind::map; }
  bool is_namespace() const { return kind_ == ValueKind::name_space; }
  bool is_number() const { return kind_ == ValueKind::integer || kind_ == ValueKind::floating; }
  bool is_function() const { return kind_ == ValueKind::function; }
  // Maps and namespaces both hold attributes.
  bool is_attribute_container() const { return is_map() || is_namespace(); }
  bool is_tuple() const { return is_list() && tuple_; }

  bool as_bool() const { return boolean_; }
  int64_t as_int() const { return integer_; }
  double as_number() const;  // int, float or bool as double
  const std::string& as_string() const;
  const ValueList& as_list() const;
  ValueMap& as_map() const;  // maps and namespaces
  const NativeFunction& as_function() const;
  // Identity of a shared container (maps, lists, namespaces, functions) for `==`.
  const void* identity() const { return object_.get(); }

  bool truthy() const;
  const char* type_name() const;
  // Container nesting depth (0 for scalars). Bounded by k_max_value_depth so that no value
  // is too deep to print, compare or destroy without exhausting the stack.
  int depth() const;

 private:
  ValueKind kind_ = ValueKind::undefined;
  bool boolean_ = false;
  bool tuple_ = false;
  uint16_t depth_ = 0;
  int64_t integer_ = 0;
  double floating_ = 0.0;
  std::shared_ptr<void> object_;  // std::string, ValueList, ValueMap or NativeFunction
};

// JavaScript Number.prototype.toString for a double (shortest round trip).
std::string format_js_number(double value);
// Texts made from values are capped (a list can hold one long string many times over);
// exceeding max_bytes throws flare::Error.
constexpr size_t k_max_text_bytes = 64u << 20;
// How `{{ value }}` prints (FloatValue prints 2.0 as "2.0"; lists and maps print as JSON).
std::string to_output_string(const Value& value, size_t max_bytes = k_max_text_bytes);
// JavaScript String(value.value): what `+` and `~` concatenate and `join` joins.
std::string to_js_string(const Value& value, size_t max_bytes = k_max_text_bytes);

struct JsonOptions {
  int indent = 0;  // 0: single line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_separator;
  std::string key_separator;
  bool undefined_as_null = true;
  size_t max_bytes = k_max_text_bytes;
};
// JSON as the reference renders `tojson` (Python json.dumps layout, JavaScript number text).
std::string to_json(const Value& value, const JsonOptions& options);
// JSON.stringify of one string.
void append_json_string(std::string& out, std::string_view text, bool ensure_ascii);

// JavaScript loose equality (`==`) and strict equality (`in`, `unique`, `equalto`) of .value.
bool loose_equal(const Value& a, const Value& b);
bool strict_equal(const Value& a, const Value& b);

}  // namespace flare::text::jinja
