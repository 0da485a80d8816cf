// Value model of the template interpreter: construction, truthiness, printing, JSON and
// equality, all following the JavaScript semantics of the reference renderer.
#include "text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "common/error.h"
#include "text/jinja/utf8.h"

namespace flare::text::jinja {

// ---- ValueMap ----

// Small maps (most template maps: messages, loop) search linearly; an index is built
// only once a map grows past k_index_threshold entries.
const Value* ValueMap::find(std::string_view key) const {
  if (index_.empty()) {
    for (const auto& entry : entries_) {
      if (entry.first == key) return &entry.second;
    }
    return nullptr;
  }
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void ValueMap::set(std::string key, Value value) {
  if (const Value* found = find(key)) {
    const_cast<Value&>(*found) = std::move(value);
    return;
  }
  entries_.emplace_back(std::move(key), std::move(value));
  if (!index_.empty()) {
    index_.emplace(entries_.back().first, entries_.size() - 1);
  } else if (entries_.size() > k_index_threshold) {
    for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
  }
}

bool ValueMap::erase(std::string_view key) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].first != key) continue;
    entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
    index_.clear();
    if (entries_.size() > k_index_threshold) {
      for (size_t j = 0; j < entries_.size(); ++j) index_.emplace(entries_[j].first, j);
    }
    return true;
  }
  return false;
}

void ValueMap::clear() {
  entries_.clear();
  index_.clear();
}

const Value* CallArgs::keyword(std::string_view name) const {
  for (const auto& [key, value] : keywords) {
    if (key == name) return &value;
  }
  return nullptr;
}

// ---- Value ----

Value Value::none() {
  Value v;
  v.kind_ = ValueKind::none;
  return v;
}
Value Value::boolean(bool value) {
  Value v;
  v.kind_ = ValueKind::boolean;
  v.boolean_ = value;
  return v;
}
Value Value::integer(int64_t value) {
  Value v;
  v.kind_ = ValueKind::integer;
  v.integer_ = value;
  return v;
}
Value Value::floating(double value) {
  Value v;
  v.kind_ = ValueKind::floating;
  v.floating_ = value;
  return v;
}
Value Value::string(std::string value) {
  Value v;
  v.kind_ = ValueKind::string;
  v.object_ = std::make_shared<std::string>(std::move(value));
  return v;
}
namespace {
int checked_depth(int depth) {
  if (depth > k_max_value_depth) fail_input("value nested deeper than {} levels", k_max_value_depth);
  return depth;
}
}  // namespace

int Value::depth() const { return kind_ == ValueKind::name_space ? as_map().depth() : depth_; }

Value Value::list(ValueList items, bool is_tuple) {
  Value v;
  int depth = 0;
  for (const Value& item : items) depth = std::max(depth, item.depth());
  v.depth_ = static_cast<uint16_t>(checked_depth(depth + 1));
  v.kind_ = ValueKind::list;
  v.tuple_ = is_tuple;
  v.object_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::map(ValueMap entries) {
  Value v;
  int depth = 0;
  for (const auto& entry : entries.entries()) depth = std::max(depth, entry.second.depth());
  v.depth_ = static_cast<uint16_t>(checked_depth(depth + 1));
  v.kind_ = ValueKind::map;
  v.object_ = std::make_shared<ValueMap>(std::move(entries));
  return v;
}
Value Value::name_space(ValueMap entries) {
  Value v;
  int depth = 0;
  for (const auto& entry : entries.entries()) depth = std::max(depth, entry.second.depth());
  entries.raise_depth(checked_depth(depth + 1));
  v.kind_ = ValueKind::name_space;
  v.object_ = std::make_shared<ValueMap>(std::move(entries));
  return v;
}
Value Value::function(NativeFunction function) {
  Value v;
  v.kind_ = ValueKind::function;
  v.object_ = std::make_shared<NativeFunction>(std::move(function));
  return v;
}

double Value::as_number() const {
  switch (kind_) {
    case ValueKind::integer: return static_cast<double>(integer_);
    case ValueKind::floating: return floating_;
    case ValueKind::boolean: return boolean_ ? 1.0 : 0.0;
    default: return 0.0;
  }
}

const std::string& Value::as_string() const { return *static_cast<const std::string*>(object_.get()); }
const ValueList& Value::as_list() const { return *static_cast<const ValueList*>(object_.get()); }
ValueMap& Value::as_map() const { return *static_cast<ValueMap*>(object_.get()); }
const NativeFunction& Value::as_function() const {
  return *static_cast<const NativeFunction*>(object_.get());
}

bool Value::truthy() const {
  switch (kind_) {
    case ValueKind::undefined:
    case ValueKind::none: return false;
    case ValueKind::boolean: return boolean_;
    case ValueKind::integer: return integer_ != 0;
    case ValueKind::floating: return floating_ != 0.0 && !std::isnan(floating_);
    case ValueKind::string: return !as_string().empty();
    case ValueKind::list: return !as_list().empty();
    case ValueKind::map: return !as_map().empty();
    case ValueKind::function:
    case ValueKind::name_space: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case ValueKind::undefined: return "UndefinedValue";
    case ValueKind::none: return "NullValue";
    case ValueKind::boolean: return "BooleanValue";
    case ValueKind::integer: return "IntegerValue";
    case ValueKind::floating: return "FloatValue";
    case ValueKind::string: return "StringValue";
    case ValueKind::list: return tuple_ ? "TupleValue" : "ArrayValue";
    case ValueKind::map: return "ObjectValue";
    case ValueKind::function: return "FunctionValue";
    case ValueKind::name_space: return "NamespaceValue";
  }
  return "?";
}

// ---- printing ----

std::string format_js_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == 0.0) return "0";
  std::string sign = value < 0 ? "-" : "";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), std::fabs(value), std::chars_format::scientific);
  std::string text(buffer, result.ptr);  // d.ddde+XX
  size_t e_pos = text.find('e');
  std::string digits = text.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exponent = std::atoi(text.c_str() + e_pos + 1);
  int k = static_cast<int>(digits.size());
  int n = exponent + 1;  // value = 0.digits * 10^n
  if (k <= n && n <= 21) return sign + digits + std::string(static_cast<size_t>(n - k), '0');
  if (0 < n && n <= 21) return sign + digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  if (-6 < n && n <= 0) return sign + "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  std::string exp_text = (n - 1 >= 0 ? "+" : "-") + std::to_string(std::abs(n - 1));
  if (k == 1) return sign + digits + "e" + exp_text;
  return sign + digits.substr(0, 1) + "." + digits.substr(1) + "e" + exp_text;
}

namespace {
void check_text_size(size_t n_bytes, size_t max_bytes) {
  if (n_bytes > max_bytes) fail_input("output exceeds the limit of {} bytes", max_bytes);
}
}  // namespace

std::string to_js_string(const Value& value, size_t max_bytes) {
  switch (value.kind()) {
    case ValueKind::undefined: return "undefined";
    case ValueKind::none: return "null";
    case ValueKind::boolean: return value.as_bool() ? "true" : "false";
    case ValueKind::integer: return std::to_string(value.as_int());
    case ValueKind::floating: return format_js_number(value.as_number());
    case ValueKind::string: return value.as_string();
    case ValueKind::list: {
      std::string out;
      bool first = true;
      for (const Value& item : value.as_list()) {
        if (!first) out += ',';
        first = false;
        // Elements print as the reference's value objects do (NullValue prints "null").
        out += item.is_none() ? "null" : item.is_undefined() ? "undefined" : to_output_string(item, max_bytes);
        check_text_size(out.size(), max_bytes);
      }
      return out;
    }
    case ValueKind::map:
    case ValueKind::name_space: return "[object Map]";
    case ValueKind::function: return "[function]";
  }
  return "";
}

std::string to_output_string(const Value& value, size_t max_bytes) {
  switch (value.kind()) {
    case ValueKind::floating: {
      double v = value.as_number();
      if (v == 0.0 && std::signbit(v)) return "-0.0";
      if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 1e21) return format_js_number(v) + ".0";
      return format_js_number(v);
    }
    case ValueKind::list:
    case ValueKind::map:
    case ValueKind::name_space: {
      JsonOptions options;
      options.undefined_as_null = false;
      options.max_bytes = max_bytes;
      return to_json(value, options);
    }
    default: return to_js_string(value, max_bytes);
  }
}

// ---- JSON ----

void append_json_string(std::string& out, std::string_view text, bool ensure_ascii) {
  static const char* hex = "0123456789abcdef";
  const auto append_unit = [&](unsigned unit) {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += hex[(unit >> shift) & 0xF];
  };
  out += '"';
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    char32_t cp = utf8_next(text, pos);
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (cp < 0x20) {
      append_unit(static_cast<unsigned>(cp));
    } else if (ensure_ascii && cp >= 0x7F) {
      if (cp >= 0x10000) {
        char32_t v = cp - 0x10000;
        append_unit(0xD800 + static_cast<unsigned>(v >> 10));
        append_unit(0xDC00 + static_cast<unsigned>(v & 0x3FF));
      } else {
        append_unit(static_cast<unsigned>(cp));
      }
    } else {
      out.append(text.substr(start, pos - start));
    }
  }
  out += '"';
}

namespace {

constexpr int k_max_json_depth = 512;  // values can be cyclic through namespaces

void append_json(std::string& out, const Value& value, const JsonOptions& options, int depth) {
  if (depth > k_max_json_depth) fail_input("tojson: value nested deeper than {} levels (cyclic?)", k_max_json_depth);
  check_text_size(out.size(), options.max_bytes);
  std::string item_separator = options.has_separators ? options.item_separator : options.indent ? "," : ", ";
  std::string key_separator = options.has_separators ? options.key_separator : ": ";
  std::string base_padding = "\n" + std::string(static_cast<size_t>(options.indent * depth), ' ');
  std::string child_padding = base_padding + std::string(static_cast<size_t>(options.indent), ' ');
  switch (value.kind()) {
    case ValueKind::undefined: out += options.undefined_as_null ? "null" : "undefined"; return;
    case ValueKind::none: out += "null"; return;
    case ValueKind::boolean:
    case ValueKind::integer: out += to_js_string(value); return;
    case ValueKind::floating: {
      double v = value.as_number();
      out += std::isfinite(v) ? format_js_number(v) : "null";
      return;
    }
    case ValueKind::string: append_json_string(out, value.as_string(), options.ensure_ascii); return;
    case ValueKind::list: {
      if (value.is_tuple()) fail_input("Cannot convert to JSON: TupleValue");  // as the reference does
      const ValueList& items = value.as_list();
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_separator;
        if (options.indent) out += child_padding;
        append_json(out, items[i], options, depth + 1);
      }
      if (options.indent && !items.empty()) out += base_padding;
      out += ']';
      return;
    }
    case ValueKind::map:
    case ValueKind::name_space: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : value.as_map().entries()) entries.push_back(&entry);
      if (options.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += item_separator;
        if (options.indent) out += child_padding;
        append_json_string(out, entries[i]->first, options.ensure_ascii);
        out += key_separator;
        append_json(out, entries[i]->second, options, depth + 1);
      }
      if (options.indent && !entries.empty()) out += base_padding;
      out += '}';
      return;
    }
    case ValueKind::function: fail_input("Cannot convert to JSON: FunctionValue");
  }
}

}  // namespace

std::string to_json(const Value& value, const JsonOptions& options) {
  std::string out;
  append_json(out, value, options, 0);
  return out;
}

// ---- equality ----

namespace {
bool is_numeric_like(const Value& v) {
  return v.kind() == ValueKind::integer || v.kind() == ValueKind::floating || v.kind() == ValueKind::boolean;
}

bool string_to_number(const std::string& text, double& out) {
  std::string_view trimmed = js_trim(text);
  if (trimmed.empty()) {
    out = 0.0;
    return true;
  }
  std::string copy(trimmed);
  char* end = nullptr;
  out = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size();
}
}  // namespace

bool strict_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_number() == b.as_number();
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::undefined:
    case ValueKind::none: return true;
    case ValueKind::boolean: return a.as_bool() == b.as_bool();
    case ValueKind::string: return a.as_string() == b.as_string();
    default: return a.identity() == b.identity();
  }
}

bool loose_equal(const Value& a, const Value& b) {
  bool a_nullish = a.is_none() || a.is_undefined();
  bool b_nullish = b.is_none() || b.is_undefined();
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  if (is_numeric_like(a) && is_numeric_like(b)) return a.as_number() == b.as_number();
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (a.is_string() && is_numeric_like(b)) {
    double number = 0.0;
    return string_to_number(a.as_string(), number) && number == b.as_number();
  }
  if (b.is_string() && is_numeric_like(a)) return loose_equal(b, a);
  return a.kind() == b.kind() && a.identity() == b.identity();
}

}  // namespace flare::text::jinja
