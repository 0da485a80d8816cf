// Filters, tests, builtin methods (string and dict) and global functions of the template
// interpreter, following @huggingface/jinja. A few Jinja features the reference lacks are
// provided too (select/reject, map by filter name, str.format); where the reference fails,
// these are extensions, never differences in what both render.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <unordered_set>

#include "common/error.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/utf8.h"

namespace flare::text::jinja {

namespace {

const Value* argument_at(const CallArgs& args, size_t index, std::string_view keyword) {
  if (index < args.positional.size()) return &args.positional[index];
  return args.keyword(keyword);
}

bool is_word_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

std::string title_case(const std::string& text) {
  std::string out = text;
  for (size_t i = 0; i < out.size(); ++i) {
    bool boundary = i == 0 || !is_word_char(out[i - 1]);
    if (boundary && out[i] >= 'a' && out[i] <= 'z') out[i] = static_cast<char>(out[i] - 'a' + 'A');
  }
  return out;
}

std::string indent_lines(const std::string& text, const std::string& prefix, bool first, bool blank) {
  std::string out;
  size_t start = 0;
  for (size_t line = 0;; ++line) {
    size_t end = text.find('\n', start);
    std::string_view piece = std::string_view(text).substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!((!first && line == 0) || (!blank && piece.empty()))) out += prefix;
    out += piece;
    if (end == std::string::npos) break;
    out += '\n';
    start = end + 1;
  }
  return out;
}

std::vector<std::string> split_string(const std::string& text, const Value* separator, int64_t max_split) {
  std::vector<std::string> parts;
  if (!separator || separator->is_none()) {
    std::string_view rest = js_trim_start(text);
    while (!rest.empty()) {
      if (max_split != -1 && static_cast<int64_t>(parts.size()) >= max_split) {
        parts.emplace_back(rest);
        break;
      }
      size_t pos = 0, end = 0;
      while (pos < rest.size()) {
        size_t next = pos;
        if (is_js_space(utf8_next(rest, next))) break;
        pos = next;
      }
      end = pos;
      parts.emplace_back(rest.substr(0, end));
      rest = js_trim_start(rest.substr(end));
    }
    return parts;
  }
  if (!separator->is_string()) template_error("sep argument must be a string or null");
  const std::string& sep = separator->as_string();
  if (sep.empty()) template_error("empty separator");
  size_t start = 0;
  while (true) {
    size_t found = text.find(sep, start);
    if (found == std::string::npos || (max_split != -1 && static_cast<int64_t>(parts.size()) >= max_split)) {
      parts.push_back(text.substr(start));
      break;
    }
    parts.push_back(text.substr(start, found - start));
    start = found + sep.size();
  }
  return parts;
}

std::string replace_string(const std::string& text, const std::string& from, const std::string& to, int64_t count) {
  if (count == 0) return text;
  int64_t remaining = count < 0 ? INT64_MAX : count;
  std::string out;
  if (from.empty()) {  // insert between code points, as a Unicode-aware empty regex does
    size_t pos = 0;
    while (true) {
      if (remaining > 0) {
        out += to;
        --remaining;
      }
      if (pos >= text.size()) break;
      size_t start = pos;
      utf8_next(text, pos);
      out.append(text, start, pos - start);
    }
    return out;
  }
  size_t start = 0;
  while (remaining > 0) {
    size_t found = text.find(from, start);
    if (found == std::string::npos) break;
    out.append(text, start, found - start);
    out += to;
    start = found + from.size();
    --remaining;
  }
  out.append(text, start, std::string::npos);
  return out;
}

// Python str.format with {} / {0} / {name} fields.
std::string format_string(const std::string& pattern, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if ((c == '{' || c == '}') && i + 1 < pattern.size() && pattern[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    size_t close = pattern.find('}', i);
    if (close == std::string::npos) template_error("Single '{' encountered in format string");
    std::string field = pattern.substr(i + 1, close - i - 1);
    const Value* value = nullptr;
    if (field.empty()) {
      value = auto_index < args.positional.size() ? &args.positional[auto_index] : nullptr;
      ++auto_index;
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; }) && field.size() < 9) {
      size_t index = std::stoul(field);
      value = index < args.positional.size() ? &args.positional[index] : nullptr;
    } else {
      value = args.keyword(field);
    }
    if (!value) template_error(fmt::format("format: no value for field '{}'", field));
    out += value->is_string() ? value->as_string() : to_output_string(*value);
    i = close;
  }
  return out;
}

Value bound(std::function<Value(CallArgs&)> function) {
  return Value::function([function = std::move(function)](CallArgs& args, Interpreter&, const EnvPtr&) {
    return function(args);
  });
}

Value string_replace_method(const Value& object, const CallArgs& args, Interpreter& interpreter) {
  if (args.positional.size() < 2) template_error("replace() requires at least two arguments");
  const Value& from = args.positional[0];
  const Value& to = args.positional[1];
  if (!from.is_string() || !to.is_string()) template_error("replace() arguments must be strings");
  const Value* count = argument_at(args, 2, "count");
  if (count && !count->is_none() && count->kind() != ValueKind::integer) {
    template_error("replace() count argument must be a number or null");
  }
  int64_t n = count && count->kind() == ValueKind::integer ? count->as_int() : -1;
  const std::string& text = object.as_string();
  size_t n_matches = from.as_string().empty() ? text.size() + 1 : 0;
  if (!from.as_string().empty()) {
    for (size_t p = text.find(from.as_string()); p != std::string::npos; p = text.find(from.as_string(), p + from.as_string().size())) ++n_matches;
  }
  interpreter.check_string(text.size() + n_matches * to.as_string().size());
  return Value::string(replace_string(text, from.as_string(), to.as_string(), n));
}

Value string_method(const Value& object, const std::string& name, Interpreter& interpreter) {
  const std::string& s = object.as_string();
  auto string_result = [object](auto transform) {
    return bound([object, transform](CallArgs&) { return Value::string(transform(object.as_string())); });
  };
  if (name == "upper") return string_result([](const std::string& t) { return to_upper(t); });
  if (name == "lower") return string_result([](const std::string& t) { return to_lower(t); });
  if (name == "strip") return string_result([](const std::string& t) { return std::string(js_trim(t)); });
  if (name == "lstrip") return string_result([](const std::string& t) { return std::string(js_trim_start(t)); });
  if (name == "rstrip") return string_result([](const std::string& t) { return std::string(js_trim_end(t)); });
  if (name == "title") return string_result(title_case);
  if (name == "capitalize") {
    return string_result([](const std::string& t) {
      if (t.empty()) return t;
      size_t pos = 0;
      utf8_next(t, pos);
      return to_upper(t.substr(0, pos)) + t.substr(pos);
    });
  }
  if (name == "length") return Value::integer(static_cast<int64_t>(utf16_length(s)));
  if (name == "startswith" || name == "endswith") {
    bool starts = name == "startswith";
    return bound([object, starts, name](CallArgs& args) {
      if (args.positional.empty()) template_error(name + "() requires at least one argument");
      const std::string& text = object.as_string();
      auto test = [&](const std::string& affix) {
        if (affix.size() > text.size()) return false;
        return starts ? text.compare(0, affix.size(), affix) == 0
                      : text.compare(text.size() - affix.size(), affix.size(), affix) == 0;
      };
      const Value& pattern = args.positional[0];
      if (pattern.is_string()) return Value::boolean(test(pattern.as_string()));
      if (pattern.is_list()) {
        for (const Value& item : pattern.as_list()) {
          if (!item.is_string()) template_error(name + "() tuple elements must be strings");
          if (test(item.as_string())) return Value::boolean(true);
        }
        return Value::boolean(false);
      }
      template_error(name + "() argument must be a string or tuple of strings");
    });
  }
  if (name == "split") {
    return bound([object, &interpreter](CallArgs& args) {
      const Value* separator = argument_at(args, 0, "sep");
      const Value* max_split = argument_at(args, 1, "maxsplit");
      if (max_split && max_split->kind() != ValueKind::integer) template_error("maxsplit argument must be a number");
      ValueList parts;
      for (std::string& part : split_string(object.as_string(), separator, max_split ? max_split->as_int() : -1)) {
        parts.push_back(Value::string(std::move(part)));
      }
      interpreter.check_items(parts.size());
      return Value::list(std::move(parts));
    });
  }
  if (name == "replace") {
    return bound([object, &interpreter](CallArgs& args) { return string_replace_method(object, args, interpreter); });
  }
  if (name == "format") {
    return bound([object, &interpreter](CallArgs& args) {
      std::string out = format_string(object.as_string(), args);
      interpreter.check_string(out.size());
      return Value::string(std::move(out));
    });
  }
  return Value();
}

ValueList map_items(const Value& object) {
  ValueList items;
  for (const auto& [key, value] : object.as_map().entries()) items.push_back(Value::list({Value::string(key), value}));
  return items;
}

// Ordering for sort/dictsort: numbers with numbers, strings with strings.
int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_none() && b.is_none()) return 0;
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (a.is_none() || b.is_none() || a.is_undefined() || b.is_undefined()) {
    template_error(fmt::format("Cannot compare {} with {}", a.type_name(), b.type_name()));
  }
  auto numeric = [](const Value& v) { return v.is_number() || v.kind() == ValueKind::boolean; };
  if (numeric(a) && numeric(b)) return a.as_number() < b.as_number() ? -1 : a.as_number() > b.as_number() ? 1 : 0;
  if (a.kind() != b.kind()) template_error(fmt::format("Cannot compare different types: {} and {}", a.type_name(), b.type_name()));
  if (!a.is_string()) template_error(fmt::format("Cannot compare type: {}", a.type_name()));
  std::string x = case_sensitive ? a.as_string() : to_lower(a.as_string());
  std::string y = case_sensitive ? b.as_string() : to_lower(b.as_string());
  return x < y ? -1 : x > y ? 1 : 0;
}

Value attribute_path(const Value& item, const std::string& path) {
  Value value = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (value.is_attribute_container()) {
      const Value* found = value.as_map().find(part);
      value = found ? *found : Value();
    } else if (value.is_list()) {
      char* end = nullptr;
      long index = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || index < 0 || static_cast<size_t>(index) >= value.as_list().size()) return Value();
      value = value.as_list()[static_cast<size_t>(index)];
    } else {
      return Value();
    }
    if (dot == std::string::npos) return value;
    start = dot + 1;
  }
}

bool bool_argument(const Value* value, bool fallback, const char* what) {
  if (!value) return fallback;
  if (value->kind() != ValueKind::boolean) template_error(fmt::format("{} must be a boolean", what));
  return value->as_bool();
}

Value dict_method(const Value& object, const std::string& name) {
  if (name == "get") {
    return bound([object](CallArgs& args) {
      if (args.positional.empty() || !args.positional[0].is_string()) template_error("Object key must be a string");
      if (const Value* found = object.as_map().find(args.positional[0].as_string())) return *found;
      return args.positional.size() > 1 ? args.positional[1] : Value::none();
    });
  }
  if (name == "items") return bound([object](CallArgs&) { return Value::list(map_items(object)); });
  if (name == "keys") {
    return bound([object](CallArgs&) {
      ValueList keys;
      for (const auto& entry : object.as_map().entries()) keys.push_back(Value::string(entry.first));
      return Value::list(std::move(keys));
    });
  }
  if (name == "values") {
    return bound([object](CallArgs&) {
      ValueList values;
      for (const auto& entry : object.as_map().entries()) values.push_back(entry.second);
      return Value::list(std::move(values));
    });
  }
  if (name == "dictsort") {
    return bound([object](CallArgs& args) {
      bool case_sensitive = bool_argument(argument_at(args, 0, "case_sensitive"), false, "case_sensitive");
      const Value* by = argument_at(args, 1, "by");
      if (by && (!by->is_string() || (by->as_string() != "key" && by->as_string() != "value"))) {
        template_error("by must be either 'key' or 'value'");
      }
      size_t index = by && by->as_string() == "value" ? 1 : 0;
      bool reverse = bool_argument(argument_at(args, 2, "reverse"), false, "reverse");
      ValueList items = map_items(object);
      std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        int result = compare_values(a.as_list()[index], b.as_list()[index], case_sensitive);
        return reverse ? result > 0 : result < 0;
      });
      return Value::list(std::move(items));
    });
  }
  return Value();
}

}  // namespace

Value Interpreter::member_of(const Value& object, const std::string& name) {
  if (object.is_string()) return string_method(object, name, *this);
  if (object.is_list()) return name == "length" ? Value::integer(static_cast<int64_t>(object.as_list().size())) : Value();
  if (object.is_map()) return dict_method(object, name);
  return Value();
}

bool Interpreter::apply_test(const std::string& name, const Value& v, const Value* argument) {
  ValueKind k = v.kind();
  if (name == "boolean") return k == ValueKind::boolean;
  if (name == "callable") return k == ValueKind::function;
  if (name == "odd" || name == "even") {
    if (k != ValueKind::integer) template_error(fmt::format("cannot {} on {}", name, v.type_name()));
    bool odd = v.as_int() % 2 != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "false") return k == ValueKind::boolean && !v.as_bool();
  if (name == "true") return k == ValueKind::boolean && v.as_bool();
  if (name == "none") return k == ValueKind::none;
  if (name == "string") return k == ValueKind::string;
  if (name == "number") return v.is_number();
  if (name == "integer") return k == ValueKind::integer;
  if (name == "iterable") return k == ValueKind::list || k == ValueKind::string;
  if (name == "mapping") return k == ValueKind::map;
  if (name == "sequence") return k == ValueKind::list || k == ValueKind::map || k == ValueKind::string;
  if (name == "lower") return k == ValueKind::string && v.as_string() == to_lower(v.as_string());
  if (name == "upper") return k == ValueKind::string && v.as_string() == to_upper(v.as_string());
  if (name == "defined") return k != ValueKind::undefined;
  if (name == "undefined") return k == ValueKind::undefined;
  if (name == "equalto" || name == "eq") return argument ? strict_equal(v, *argument) : k == ValueKind::undefined;
  template_error("Unknown test: " + name);
}

Value Interpreter::apply_filter(const Value& operand, const Node& filter, const EnvPtr& env) {
  if (filter.kind == NodeKind::identifier) return apply_simple_filter(operand, filter.text, env);
  if (filter.kind != NodeKind::call || filter.a->kind != NodeKind::identifier) template_error("Unknown filter");
  return apply_call_filter(operand, filter.a->text, filter, env);
}

Value Interpreter::simple_list_filter(const Value& operand, const std::string& name, const EnvPtr& env) {
  const ValueList& items = operand.as_list();
  if (name == "list") return operand;
  if (name == "first") return items.empty() ? Value() : items.front();
  if (name == "last") return items.empty() ? Value() : items.back();
  if (name == "length" || name == "count") return Value::integer(static_cast<int64_t>(items.size()));
  if (name == "reverse") return Value::list(ValueList(items.rbegin(), items.rend()));
  if (name == "sort") {
    ValueList sorted = items;
    std::stable_sort(sorted.begin(), sorted.end(), [](const Value& a, const Value& b) { return compare_values(a, b, false) < 0; });
    return Value::list(std::move(sorted));
  }
  if (name == "join") return apply_call_filter(operand, name, Node(NodeKind::call, offset_), env);
  if (name == "string") return Value::string(to_output_string(operand, limits_.max_output_bytes));
  if (name == "unique") {
    ValueList output;
    for (const Value& item : items) {
      bool seen = std::any_of(output.begin(), output.end(), [&](const Value& o) { return strict_equal(o, item); });
      if (!seen) output.push_back(item);
    }
    return Value::list(std::move(output));
  }
  template_error("Unknown ArrayValue filter: " + name);
}

Value Interpreter::apply_simple_filter(const Value& operand, const std::string& name, const EnvPtr& env) {
  if (name == "safe") return operand;
  if (name == "tojson") {
    JsonOptions options;
    options.max_bytes = limits_.max_output_bytes;
    std::string json = to_json(operand, options);
    check_string(json.size());
    return Value::string(std::move(json));
  }
  if (operand.is_list()) return simple_list_filter(operand, name, env);
  if (operand.is_string()) {
    const std::string& s = operand.as_string();
    if (name == "length" || name == "count" || name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      Value member = member_of(operand, name == "count" ? "length" : name);
      if (!member.is_function()) return member;
      CallArgs none;
      return call(member, none, env);
    }
    if (name == "trim") return Value::string(std::string(js_trim(s)));
    if (name == "indent") return Value::string(indent_lines(s, "    ", false, false));
    if (name == "join" || name == "string") return operand;
    if (name == "int") {
      char* end = nullptr;
      long long value = std::strtoll(std::string(js_trim_start(s)).c_str(), &end, 10);
      return Value::integer(value);
    }
    if (name == "float") return Value::floating(std::strtod(std::string(js_trim_start(s)).c_str(), nullptr));
    if (name == "list") {
      ValueList chars;
      for (std::string& c : utf8_chars(s)) chars.push_back(Value::string(std::move(c)));
      return Value::list(std::move(chars));
    }
    template_error("Unknown StringValue filter: " + name);
  }
  if (operand.is_number()) {
    bool is_int = operand.kind() == ValueKind::integer;
    if (name == "abs") return is_int ? Value::integer(std::llabs(operand.as_int())) : Value::floating(std::fabs(operand.as_number()));
    if (name == "int") return is_int ? operand : Value::integer(static_cast<int64_t>(std::floor(operand.as_number())));
    if (name == "float") return Value::floating(operand.as_number());
    if (name == "string") return Value::string(to_output_string(operand, limits_.max_output_bytes));
    template_error("Unknown NumericValue filter: " + name);
  }
  if (operand.is_map()) {
    if (name == "items") return Value::list(map_items(operand));
    if (name == "length" || name == "count") return Value::integer(static_cast<int64_t>(operand.as_map().size()));
    if (name == "string") return Value::string(to_output_string(operand, limits_.max_output_bytes));
    Value method = dict_method(operand, name);
    if (method.is_function()) {
      CallArgs none;
      return call(method, none, env);
    }
    template_error("Unknown ObjectValue filter: " + name);
  }
  if (operand.kind() == ValueKind::boolean) {
    if (name == "bool") return operand;
    if (name == "int") return Value::integer(operand.as_bool() ? 1 : 0);
    if (name == "float") return Value::floating(operand.as_bool() ? 1.0 : 0.0);
    if (name == "string") return Value::string(operand.as_bool() ? "true" : "false");
    template_error("Unknown BooleanValue filter: " + name);
  }
  if (operand.is_undefined() && name == "default") return Value::string("");
  template_error(fmt::format("Cannot apply filter \"{}\" to type: {}", name, operand.type_name()));
}

// tojson(indent=, ensure_ascii=, sort_keys=, separators=) as transformers passes them.
Value Interpreter::tojson_filter(const Value& operand, const CallArgs& args) {
  JsonOptions options;
  options.max_bytes = limits_.max_output_bytes;
  const Value* indent = args.keyword("indent");
  if (indent && !indent->is_none()) {
    if (indent->kind() != ValueKind::integer) template_error("If set, indent must be a number");
    options.indent = static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 64));
  }
  options.ensure_ascii = bool_argument(args.keyword("ensure_ascii"), false, "If set, ensure_ascii");
  options.sort_keys = bool_argument(args.keyword("sort_keys"), false, "If set, sort_keys");
  const Value* separators = args.keyword("separators");
  if (separators && !separators->is_none()) {
    if (!separators->is_list() || separators->as_list().size() != 2 || !separators->as_list()[0].is_string() ||
        !separators->as_list()[1].is_string()) {
      template_error("separators must be a tuple of two strings");
    }
    options.has_separators = true;
    options.item_separator = separators->as_list()[0].as_string();
    options.key_separator = separators->as_list()[1].as_string();
  }
  std::string json = to_json(operand, options);
  check_string(json.size());
  return Value::string(std::move(json));
}

Value Interpreter::apply_call_filter(const Value& operand, const std::string& name, const Node& call_node, const EnvPtr& env) {
  CallArgs args = eval_arguments(call_node.items, env);
  if (name == "tojson") return tojson_filter(operand, args);
  if (name == "join") {
    std::vector<std::string> parts;
    if (operand.is_string()) {
      parts = utf8_chars(operand.as_string());
    } else if (operand.is_list()) {
      for (const Value& item : operand.as_list()) parts.push_back(item.is_none() || item.is_undefined() ? "" : to_js_string(item, limits_.max_output_bytes));
    } else {
      template_error(fmt::format("Cannot apply filter \"join\" to type: {}", operand.type_name()));
    }
    const Value* separator = argument_at(args, 0, "separator");
    if (separator && !separator->is_string()) template_error("separator must be a string");
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i > 0 && separator) out += separator->as_string();
      out += parts[i];
      check_string(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "int" || name == "float") {
    bool to_int = name == "int";
    const Value* fallback = argument_at(args, 0, "default");
    Value default_value = fallback ? *fallback : to_int ? Value::integer(0) : Value::floating(0.0);
    if (operand.is_string()) {
      std::string text(js_trim_start(operand.as_string()));
      char* end = nullptr;
      if (to_int) {
        long long value = std::strtoll(text.c_str(), &end, 10);
        return end == text.c_str() ? default_value : Value::integer(value);
      }
      double value = std::strtod(text.c_str(), &end);
      return end == text.c_str() ? default_value : Value::floating(value);
    }
    if (operand.is_number()) return operand;
    if (operand.kind() == ValueKind::boolean) return to_int ? Value::integer(operand.as_bool()) : Value::floating(operand.as_bool());
    template_error(fmt::format("Cannot apply filter \"{}\" to type: {}", name, operand.type_name()));
  }
  if (name == "default" || name == "d") {
    Value fallback = args.positional.empty() ? Value::string("") : args.positional[0];
    bool boolean = bool_argument(argument_at(args, 1, "boolean"), false, "`default` filter flag");
    if (operand.is_undefined() || (boolean && !operand.truthy())) return fallback;
    return operand;
  }
  if (operand.is_list()) return apply_list_filter(operand, name, args, env);
  if (operand.is_string()) {
    if (name == "indent") {
      const Value* width = argument_at(args, 0, "width");
      std::string prefix = "    ";
      if (width && width->kind() == ValueKind::integer) {
        prefix = std::string(static_cast<size_t>(std::clamp<int64_t>(width->as_int(), 0, 1024)), ' ');
      } else if (width && width->is_string()) {
        prefix = width->as_string();
      } else if (width) {
        template_error("width must be a number");
      }
      const Value* first = argument_at(args, 1, "first");
      const Value* blank = argument_at(args, 2, "blank");
      std::string out = indent_lines(operand.as_string(), prefix, first && first->truthy(), blank && blank->truthy());
      check_string(out.size());
      return Value::string(std::move(out));
    }
    if (name == "replace") return call(member_of(operand, "replace"), args, env);
    template_error("Unknown StringValue filter: " + name);
  }
  if (operand.is_map()) {
    Value method = dict_method(operand, name);
    if (method.is_function()) return call(method, args, env);
    template_error("Unknown ObjectValue filter: " + name);
  }
  template_error(fmt::format("Cannot apply filter \"{}\" to type: {}", name, operand.type_name()));
}

Value Interpreter::apply_list_filter(const Value& operand, const std::string& name, CallArgs& args, const EnvPtr& env) {
  const ValueList& items = operand.as_list();
  if (name == "sort") {
    bool reverse = bool_argument(argument_at(args, 0, "reverse"), false, "reverse");
    bool case_sensitive = bool_argument(argument_at(args, 1, "case_sensitive"), false, "case_sensitive");
    const Value* attribute = argument_at(args, 2, "attribute");
    std::string path;
    if (attribute && attribute->is_string()) path = attribute->as_string();
    if (attribute && attribute->kind() == ValueKind::integer) path = std::to_string(attribute->as_int());
    ValueList sorted = items;
    std::stable_sort(sorted.begin(), sorted.end(), [&](const Value& a, const Value& b) {
      Value x = path.empty() ? a : attribute_path(a, path);
      Value y = path.empty() ? b : attribute_path(b, path);
      int result = compare_values(x, y, case_sensitive);
      return reverse ? result > 0 : result < 0;
    });
    return Value::list(std::move(sorted));
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    bool by_attribute = name.size() > 6;
    bool keep = name.rfind("select", 0) == 0;
    size_t first_test = by_attribute ? 1 : 0;
    if (by_attribute && (args.positional.empty() || !args.positional[0].is_string())) {
      template_error(fmt::format("arguments of `{}` must be strings", name));
    }
    const Value* test_name = first_test < args.positional.size() ? &args.positional[first_test] : nullptr;
    if (test_name && !test_name->is_string()) template_error(fmt::format("arguments of `{}` must be strings", name));
    const Value* test_argument = first_test + 1 < args.positional.size() ? &args.positional[first_test + 1] : nullptr;
    ValueList kept;
    for (const Value& item : items) {
      Value subject = item;
      if (by_attribute) {
        if (!item.is_attribute_container()) template_error(fmt::format("`{}` can only be applied to array of objects", name));
        const Value* found = item.as_map().find(args.positional[0].as_string());
        if (!found) {
          if (!keep) kept.push_back(item);
          continue;
        }
        subject = *found;
      }
      bool result = test_name ? apply_test(test_name->as_string(), subject, test_argument) : subject.truthy();
      if (result == keep) kept.push_back(item);
    }
    return Value::list(std::move(kept));
  }
  if (name == "map") {
    ValueList mapped;
    if (const Value* attribute = args.keyword("attribute")) {
      if (!attribute->is_string()) template_error("attribute must be a string");
      const Value* fallback = args.keyword("default");
      for (const Value& item : items) {
        if (!item.is_attribute_container()) template_error("items in map must be an object");
        Value value = attribute_path(item, attribute->as_string());
        mapped.push_back(value.is_undefined() && fallback ? *fallback : value);
      }
      return Value::list(std::move(mapped));
    }
    if (args.positional.empty() || !args.positional[0].is_string()) template_error("`map` needs a filter name or attribute=");
    for (const Value& item : items) mapped.push_back(apply_simple_filter(item, args.positional[0].as_string(), env));
    return Value::list(std::move(mapped));
  }
  template_error("Unknown ArrayValue filter: " + name);
}

// ---- globals ----

namespace {

Value make_range(CallArgs& args, Interpreter& interpreter) {
  if (args.positional.empty()) template_error("range expected at least 1 argument");
  for (const Value& v : args.positional) {
    if (v.kind() != ValueKind::integer) template_error("range() arguments must be integers");
  }
  int64_t start = 0, stop = 0, step = 1;
  if (args.positional.size() == 1) {
    stop = args.positional[0].as_int();
  } else {
    start = args.positional[0].as_int();
    stop = args.positional[1].as_int();
    if (args.positional.size() > 2) step = args.positional[2].as_int();
  }
  if (step == 0) template_error("range() step must not be zero");
  ValueList values;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    interpreter.check_items(values.size() + 1);
    values.push_back(Value::integer(i));
  }
  return Value::list(std::move(values));
}

std::string strftime_now(const std::string& format) {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm local{};
  localtime_r(&now, &local);
  static const char* months[] = {"January", "February", "March", "April", "May", "June", "July",
                                 "August", "September", "October", "November", "December"};
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out += format[i];
      continue;
    }
    char spec = format[++i];
    switch (spec) {
      case 'Y': out += std::to_string(local.tm_year + 1900); break;
      case 'm': out += fmt::format("{:02}", local.tm_mon + 1); break;
      case 'd': out += fmt::format("{:02}", local.tm_mday); break;
      case 'b': out += std::string(months[local.tm_mon]).substr(0, 3); break;
      case 'B': out += months[local.tm_mon]; break;
      case 'H': out += fmt::format("{:02}", local.tm_hour); break;
      case 'M': out += fmt::format("{:02}", local.tm_min); break;
      case '%': out += '%'; break;
      default: out += '%'; out += spec;
    }
  }
  return out;
}

Value make_namespace_value(CallArgs& args, Interpreter& interpreter) {
  if (args.positional.size() > 1) template_error(fmt::format("namespace expected at most 1 argument, got {}", args.positional.size()));
  ValueMap entries;
  if (args.positional.size() == 1) {
    const Value& source = args.positional[0];
    if (source.is_map()) {
      for (const auto& [key, value] : source.as_map().entries()) entries.set(key, value);
    } else if (source.is_list()) {
      for (const Value& pair : source.as_list()) {
        if (!pair.is_list() || pair.as_list().size() != 2 || !pair.as_list()[0].is_string()) {
          template_error("namespace expected an object or an iterable of [key, value] pairs");
        }
        entries.set(pair.as_list()[0].as_string(), pair.as_list()[1]);
      }
    } else {
      template_error(fmt::format("'{}' object is not iterable", source.type_name()));
    }
  }
  for (const auto& [key, value] : args.keywords) entries.set(key, value);
  return interpreter.make_namespace(std::move(entries));
}

}  // namespace

EnvPtr make_global_environment() {
  auto env = std::make_shared<Environment>();
  env->set("false", Value::boolean(false));
  env->set("true", Value::boolean(true));
  env->set("none", Value::none());
  env->set("False", Value::boolean(false));
  env->set("True", Value::boolean(true));
  env->set("None", Value::none());
  env->set("namespace", Value::function([](CallArgs& args, Interpreter& interpreter, const EnvPtr&) {
    return make_namespace_value(args, interpreter);
  }));
  env->set("raise_exception", Value::function([](CallArgs& args, Interpreter&, const EnvPtr&) -> Value {
    template_error(args.positional.empty() ? std::string("undefined") : to_js_string(args.positional[0]));
  }));
  env->set("range", Value::function([](CallArgs& args, Interpreter& interpreter, const EnvPtr&) {
    return make_range(args, interpreter);
  }));
  env->set("strftime_now", Value::function([](CallArgs& args, Interpreter&, const EnvPtr&) {
    if (args.positional.empty() || !args.positional[0].is_string()) template_error("strftime_now expects a format string");
    return Value::string(strftime_now(args.positional[0].as_string()));
  }));
  return env;
}

}  // namespace flare::text::jinja
