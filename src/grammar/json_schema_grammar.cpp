// The JSON Schema compiler (json_schema_grammar.h). One rule per schema node; "$ref" targets get
// a named rule declared before they are compiled, which is what makes recursive schemas work.
#include "grammar/json_schema_grammar.h"

#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "grammar/code_points.h"
#include "grammar/integer_range.h"
#include "grammar/json_characters.h"
#include "grammar/regex.h"

namespace flare::grammar {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxSchemaDepth = 64;

const std::set<std::string, std::less<>> kAnnotations = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions", "contentMediaType", "contentEncoding", "discriminator"};
const std::set<std::string, std::less<>> kKeywords = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "oneOf", "allOf",
    "$ref", "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "nullable", "unevaluatedProperties",
    "uniqueItems"};

// JSON pointer escaping for paths in errors.
std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, std::string path) : root_(root), path_(std::move(path)) {}

  Grammar compile_root() {
    Sequence body;
    append(body, ws());
    body.push_back(compile(root_, "", 0));
    const auto root = b_.add_rule("root", {std::move(body)});
    return b_.build(root, path_);
  }

  Grammar any_object_root() {
    Sequence body;
    append(body, ws());
    body.push_back(any_object());
    const auto root = b_.add_rule("root", {std::move(body)});
    return b_.build(root, path_);
  }

 private:
  [[noreturn]] void error(const std::string& pointer, const std::string& message) const {
    throw GrammarError(path_ + pointer, message);
  }

  // ---- The generic JSON pieces, one rule each.
  Sequence ws() {
    if (!ws_) ws_ = b_.repeat({b_.bytes([] {
                                 ByteSet s = ByteSet::of(' ');
                                 s.add('\t');
                                 s.add('\n');
                                 s.add('\r');
                                 return s;
                               }())},
                             0, kMaxWhitespace, path_)[0];
    return {*ws_};
  }
  Element string_char() {
    if (!string_char_) string_char_ = b_.add_rule("char", json_character_alternatives(b_, CodePointSet::all()));
    return GrammarBuilder::ref(*string_char_);
  }
  Element any_string() {
    if (!string_) {
      Sequence s = b_.literal("\"");
      s.push_back(b_.star({string_char()}));
      append(s, b_.literal("\""));
      string_ = b_.add_rule("string", {std::move(s)});
    }
    return GrammarBuilder::ref(*string_);
  }
  Element digits(std::uint32_t min, std::uint32_t max) {
    return b_.choice({b_.repeat({b_.bytes(ByteSet::range('0', '9'))}, min, max, path_)});
  }
  Element any_integer() {
    if (!integer_) integer_ = b_.add_rule("integer", {integer_range(b_, std::nullopt, std::nullopt)});
    return GrammarBuilder::ref(*integer_);
  }
  Element any_number() {
    if (!number_) {
      Sequence s = {any_integer()};
      Sequence fraction = b_.literal(".");
      fraction.push_back(digits(1, 20));
      s.push_back(b_.optional(fraction));
      Sequence exponent = {b_.bytes([] {
        ByteSet e = ByteSet::of('e');
        e.add('E');
        return e;
      }())};
      exponent.push_back(b_.optional({b_.bytes([] {
        ByteSet e = ByteSet::of('+');
        e.add('-');
        return e;
      }())}));
      exponent.push_back(digits(1, 2));
      s.push_back(b_.optional(exponent));
      number_ = b_.add_rule("number", {std::move(s)});
    }
    return GrammarBuilder::ref(*number_);
  }
  Element boolean() { return b_.choice({b_.literal("true"), b_.literal("false")}); }
  Element null() { return b_.choice({b_.literal("null")}); }
  Element any_value() {
    if (!value_) {
      value_ = b_.declare("value");
      b_.define(*value_, {{any_object()}, {any_array()}, {any_string()}, {any_number()}, {boolean()}, {null()}});
    }
    return GrammarBuilder::ref(*value_);
  }
  // "{" ws (member ("," ws member)*)? "}" with member = string ws ":" ws value ws.
  Element any_object() {
    if (!object_) {
      object_ = b_.declare("object");
      Sequence member = {any_string()};
      append(member, ws());
      append(member, b_.literal(":"));
      append(member, ws());
      member.push_back(any_value());
      append(member, ws());
      Sequence more = b_.literal(",");
      append(more, ws());
      append(more, member);
      Sequence members = member;
      members.push_back(b_.star(more));
      Sequence s = b_.literal("{");
      append(s, ws());
      s.push_back(b_.optional(members));
      append(s, b_.literal("}"));
      b_.define(*object_, {std::move(s)});
    }
    return GrammarBuilder::ref(*object_);
  }
  Element any_array() {
    if (!array_) {
      array_ = b_.declare("array");
      b_.define(*array_, {array_of(any_value(), 0, std::nullopt)});
    }
    return GrammarBuilder::ref(*array_);
  }
  // "[" ws (item ws ("," ws item ws){min-1,max-1})? "]"
  Sequence array_of(Element item, std::uint32_t min, std::optional<std::uint32_t> max) {
    Sequence s = b_.literal("[");
    append(s, ws());
    if (!max || *max > 0) {
      Sequence first = {item};
      append(first, ws());
      Sequence more = b_.literal(",");
      append(more, ws());
      append(more, first);
      Sequence items = first;
      append(items, b_.repeat({b_.choice({more})}, min > 0 ? min - 1 : 0, max ? std::optional(*max - 1) : std::nullopt, path_));
      if (min == 0) {
        s.push_back(b_.optional(items));
      } else {
        append(s, items);
      }
    } else if (min > 0) {
      return {};
    }
    append(s, b_.literal("]"));
    return s;
  }

  // ---- Schema nodes.
  const Json& resolve_ref(const std::string& ref, const std::string& pointer) {
    if (ref == "#") return root_;
    if (ref.rfind("#/", 0) != 0) error(pointer + "/$ref", fmt::format("only local references (#/...) are supported, not '{}'", ref));
    try {
      return root_.at(Json::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
      error(pointer + "/$ref", fmt::format("the reference '{}' names nothing in the schema", ref));
    }
  }

  Element compile_ref(const std::string& ref, const std::string& pointer, int depth) {
    if (auto it = ref_rules_.find(ref); it != ref_rules_.end()) return GrammarBuilder::ref(it->second);
    const Json& target = resolve_ref(ref, pointer);
    const auto rule = b_.declare(fmt::format("ref{}", ref_rules_.size()));
    ref_rules_.emplace(ref, rule);
    const std::string target_pointer = ref == "#" ? "" : ref.substr(1);
    b_.define(rule, {{compile(target, target_pointer, depth + 1)}});
    return GrammarBuilder::ref(rule);
  }

  Element literal_value(const Json& value) {
    const std::string text = value.dump();
    if (text.size() + b_.n_elements() > kMaxLiteralBudget) error("", "the schema's enum or const values are too large");
    return b_.choice({b_.literal(text)});
  }

  static std::uint8_t type_bit(const std::string& t) {
    if (t == "object") return 1;
    if (t == "array") return 2;
    if (t == "string") return 4;
    if (t == "number") return 8;
    if (t == "integer") return 16;
    if (t == "boolean") return 32;
    if (t == "null") return 64;
    return 0;
  }

  std::uint8_t types_of(const Json& s, const std::string& pointer) {
    auto it = s.find("type");
    std::uint8_t types = 0;
    if (it != s.end()) {
      auto add = [&](const Json& t) {
        if (!t.is_string() || type_bit(t.get<std::string>()) == 0) error(pointer + "/type", fmt::format("unknown type {}", t.dump()));
        types |= type_bit(t.get<std::string>());
      };
      if (it->is_array()) {
        if (it->empty()) error(pointer + "/type", "an empty type list allows no value");
        for (const auto& t : *it) add(t);
      } else {
        add(*it);
      }
    } else {
      // Infer from the keywords present; none: any value.
      for (const char* k : {"properties", "required", "additionalProperties", "unevaluatedProperties"}) {
        if (s.contains(k)) types |= 1;
      }
      for (const char* k : {"items", "prefixItems", "minItems", "maxItems"}) {
        if (s.contains(k)) types |= 2;
      }
      for (const char* k : {"minLength", "maxLength", "pattern", "format"}) {
        if (s.contains(k)) types |= 4;
      }
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        if (s.contains(k)) types |= 8;
      }
      if (types == 0) types = 127;
    }
    if (s.value("nullable", false)) types |= 64;
    if ((types & 8) && (types & 16)) types &= std::uint8_t(~16);  // number covers integer
    return types;
  }

  Element compile(const Json& s, const std::string& pointer, int depth) {
    if (depth > kMaxSchemaDepth) error(pointer, fmt::format("the schema nests deeper than {} levels", kMaxSchemaDepth));
    if (s.is_boolean()) {
      if (!s.get<bool>()) error(pointer, "the schema 'false' allows no value");
      return any_value();
    }
    if (!s.is_object()) error(pointer, "a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items()) {
      if (kKeywords.contains(key) || kAnnotations.contains(key) || key.rfind("x-", 0) == 0) continue;
      error(pointer + "/" + pointer_token(key), fmt::format("the keyword '{}' is not supported", key));
    }
    if (auto ref = s.find("$ref"); ref != s.end()) {
      if (!ref->is_string()) error(pointer + "/$ref", "must be a string");
      for (const auto& [key, value] : s.items()) {
        if (key != "$ref" && kKeywords.contains(key)) {
          error(pointer + "/" + pointer_token(key), fmt::format("'{}' beside '$ref' is not supported", key));
        }
      }
      return compile_ref(ref->get<std::string>(), pointer, depth);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (auto branches = s.find(key); branches != s.end()) {
        if (!branches->is_array() || branches->empty()) error(pointer + "/" + key, "must be a non-empty array of schemas");
        for (const auto& [k, v] : s.items()) {
          if (k != key && kKeywords.contains(k) && k != "nullable") {
            error(pointer + "/" + pointer_token(k), fmt::format("'{}' beside '{}' is not supported", k, key));
          }
        }
        std::vector<Sequence> alternatives;
        for (std::size_t i = 0; i < branches->size(); ++i) {
          alternatives.push_back({compile((*branches)[i], fmt::format("{}/{}/{}", pointer, key, i), depth + 1)});
        }
        if (s.value("nullable", false)) alternatives.push_back({null()});
        return b_.choice(std::move(alternatives));
      }
    }
    if (auto parts = s.find("allOf"); parts != s.end()) return compile_all_of(s, *parts, pointer, depth);
    if (auto values = s.find("enum"); values != s.end()) {
      if (!values->is_array() || values->empty()) error(pointer + "/enum", "must be a non-empty array");
      const std::uint8_t types = s.contains("type") ? types_of(s, pointer) : 127;
      std::vector<Sequence> alternatives;
      for (const auto& v : *values) {
        if (value_has_type(v, types)) alternatives.push_back({literal_value(v)});
      }
      if (alternatives.empty()) error(pointer + "/enum", "no value of the enum has the schema's type");
      return b_.choice(std::move(alternatives));
    }
    if (auto value = s.find("const"); value != s.end()) return literal_value(*value);

    const std::uint8_t types = types_of(s, pointer);
    if (types == 127 && !has_type_keywords(s)) return any_value();
    std::vector<Sequence> alternatives;
    if (types & 1) alternatives.push_back({compile_object(s, pointer, depth)});
    if (types & 2) alternatives.push_back({compile_array(s, pointer, depth)});
    if (types & 4) alternatives.push_back({compile_string(s, pointer)});
    if (types & 8) alternatives.push_back({compile_number(s, pointer)});
    if (types & 16) alternatives.push_back({compile_integer(s, pointer)});
    if (types & 32) alternatives.push_back({boolean()});
    if (types & 64) alternatives.push_back({null()});
    b_.check_limits(path_ + pointer);
    return b_.choice(std::move(alternatives));
  }

  static bool has_type_keywords(const Json& s) {
    for (const auto& [key, value] : s.items()) {
      if (kKeywords.contains(key) && key != "nullable") return true;
    }
    return false;
  }

  static bool value_has_type(const Json& v, std::uint8_t types) {
    if (v.is_object()) return types & 1;
    if (v.is_array()) return types & 2;
    if (v.is_string()) return types & 4;
    if (v.is_number_integer() || v.is_number_unsigned()) return types & (8 | 16);
    if (v.is_number_float()) return (types & 8) || ((types & 16) && std::floor(v.get<double>()) == v.get<double>());
    if (v.is_boolean()) return types & 32;
    return types & 64;
  }

  Element compile_all_of(const Json& s, const Json& parts, const std::string& pointer, int depth) {
    const std::string at = pointer + "/allOf";
    if (!parts.is_array() || parts.empty()) error(at, "must be a non-empty array of schemas");
    for (const auto& [k, v] : s.items()) {
      if (k != "allOf" && kKeywords.contains(k)) error(pointer + "/" + pointer_token(k), fmt::format("'{}' beside 'allOf' is not supported", k));
    }
    if (parts.size() == 1) return compile(parts[0], at + "/0", depth + 1);
    // Object schemas merge: their properties and required keys together, closed if any is closed.
    Json merged = {{"type", "object"}, {"properties", Json::object()}, {"required", Json::array()}};
    std::vector<const Json*> closed_parts;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const Json* part = &parts[i];
      for (int hops = 0; part->is_object() && part->contains("$ref"); ++hops) {
        if (hops > kMaxSchemaDepth) error(fmt::format("{}/{}", at, i), "the references do not end");
        part = &resolve_ref((*part)["$ref"].get<std::string>(), fmt::format("{}/{}", at, i));
      }
      if (!part->is_object() || part->value("type", Json("object")) != Json("object") || part->contains("anyOf") ||
          part->contains("oneOf") || part->contains("allOf")) {
        error(fmt::format("{}/{}", at, i), "'allOf' is supported for one schema or for object schemas only");
      }
      if (auto p = part->find("properties"); p != part->end() && p->is_object()) {
        for (const auto& [k, v] : p->items()) merged["properties"][k] = v;
      }
      if (auto r = part->find("required"); r != part->end() && r->is_array()) {
        for (const auto& k : *r) merged["required"].push_back(k);
      }
      if (auto a = part->find("additionalProperties"); a != part->end()) merged["additionalProperties"] = *a;
      closed_parts.push_back(part);
    }
    // A closed part (additionalProperties false) forbids every key it does not declare, also
    // those another part requires: merging would accept objects the schema rejects.
    for (const Json* part : closed_parts) {
      auto extra = part->find("additionalProperties");
      if (extra == part->end() || *extra != Json(false)) continue;
      for (const auto& [key, value] : merged["properties"].items()) {
        auto declared = part->find("properties");
        if (declared == part->end() || !declared->is_object() || !declared->contains(key)) {
          error(at, fmt::format("'allOf' of objects where one forbids the property '{}' that another declares is not supported", key));
        }
      }
    }
    merged_.push_back(std::make_unique<Json>(std::move(merged)));
    return compile(*merged_.back(), at, depth + 1);
  }

  Element compile_object(const Json& s, const std::string& pointer, int depth) {
    struct Property {
      std::string key;
      const Json* schema;
      std::string pointer;
      bool required;
    };
    std::vector<Property> properties;
    const Json* declared = nullptr;
    if (auto p = s.find("properties"); p != s.end()) {
      if (!p->is_object()) error(pointer + "/properties", "must be an object");
      declared = &*p;
    }
    std::set<std::string> required;
    if (auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) error(pointer + "/required", "must be an array of property names");
      for (const auto& k : *r) {
        if (!k.is_string()) error(pointer + "/required", "must be an array of property names");
        required.insert(k.get<std::string>());
      }
    }
    // Extra keys: the schema of their values, or none.
    std::optional<const Json*> additional;
    static const Json kAny = true;
    auto extra = s.find("additionalProperties");
    if (extra == s.end()) extra = s.find("unevaluatedProperties");
    if (extra != s.end()) {
      if (extra->is_boolean()) {
        if (extra->get<bool>()) additional = &kAny;
      } else if (extra->is_object()) {
        additional = &*extra;
      } else {
        error(pointer + "/additionalProperties", "must be a boolean or a schema");
      }
    } else if (!declared) {
      additional = &kAny;  // an object without properties takes any keys
    }
    if (declared) {
      for (const auto& [key, value] : declared->items()) {
        properties.push_back({key, &value, pointer + "/properties/" + pointer_token(key), required.contains(key)});
      }
    }
    for (const auto& key : required) {
      const bool known = declared && declared->contains(key);
      if (known) continue;
      if (!additional) error(pointer + "/required", fmt::format("'{}' is required but the object takes no such property", key));
      properties.push_back({key, *additional, pointer + "/additionalProperties", true});
    }
    // R(i, written): the members from property i on, `written` saying whether one came before.
    const std::size_t n = properties.size();
    std::vector<Sequence> members(n);
    for (std::size_t i = 0; i < n; ++i) {
      Sequence m = b_.literal(Json(properties[i].key).dump());
      append(m, ws());
      append(m, b_.literal(":"));
      append(m, ws());
      m.push_back(compile(*properties[i].schema, properties[i].pointer, depth + 1));
      append(m, ws());
      members[i] = std::move(m);
    }
    Sequence comma = b_.literal(",");
    append(comma, ws());
    std::array<Sequence, 2> tail;  // R(n, false), R(n, true)
    if (additional) {
      Sequence member = {any_string()};
      append(member, ws());
      append(member, b_.literal(":"));
      append(member, ws());
      member.push_back(compile(**additional, pointer + "/additionalProperties", depth + 1));
      append(member, ws());
      Sequence more = comma;
      append(more, member);
      tail[1] = {b_.star(more)};
      Sequence first = member;
      first.push_back(b_.star(more));
      tail[0] = {b_.optional(first)};
    }
    std::array<Sequence, 2> next = tail;
    for (std::size_t i = n; i-- > 0;) {
      std::array<Sequence, 2> current;
      for (int written = 0; written < 2; ++written) {
        Sequence with = written ? comma : Sequence{};
        append(with, members[i]);
        append(with, next[1]);
        if (properties[i].required) {
          current[written] = {b_.choice({std::move(with)})};
        } else {
          current[written] = {b_.choice({std::move(with), next[written]})};
        }
      }
      next = std::move(current);
    }
    Sequence object = b_.literal("{");
    append(object, ws());
    append(object, next[0]);
    append(object, b_.literal("}"));
    return b_.choice({std::move(object)});
  }

  std::optional<std::uint32_t> count(const Json& s, const char* key, const std::string& pointer) {
    auto it = s.find(key);
    if (it == s.end()) return std::nullopt;
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<std::int64_t>() >= 0)) {
      error(pointer + "/" + key, "must be a non-negative integer");
    }
    const auto v = it->get<std::uint64_t>();
    if (v > 100000) error(pointer + "/" + key, "is too large (at most 100000 is supported)");
    return std::uint32_t(v);
  }

  Element compile_array(const Json& s, const std::string& pointer, int depth) {
    if (auto unique = s.find("uniqueItems"); unique != s.end() && unique->is_boolean() && unique->get<bool>()) {
      error(pointer + "/uniqueItems", "uniqueItems cannot be guaranteed by a grammar and is not supported");
    }
    const std::uint32_t min = count(s, "minItems", pointer).value_or(0);
    const std::optional<std::uint32_t> max = count(s, "maxItems", pointer);
    if (max && *max < min) error(pointer + "/maxItems", "is below minItems");
    std::vector<Element> prefix;
    if (auto p = s.find("prefixItems"); p != s.end()) {
      if (!p->is_array()) error(pointer + "/prefixItems", "must be an array of schemas");
      for (std::size_t i = 0; i < p->size(); ++i) prefix.push_back(compile((*p)[i], fmt::format("{}/prefixItems/{}", pointer, i), depth + 1));
    }
    std::optional<Element> items;
    if (auto it = s.find("items"); it != s.end()) {
      if (it->is_boolean() && !it->get<bool>()) {
      } else if (it->is_array()) {
        error(pointer + "/items", "an array of schemas is draft-4 tuple syntax: use prefixItems");
      } else {
        items = compile(*it, pointer + "/items", depth + 1);
      }
    } else if (prefix.empty()) {
      items = any_value();
    }
    const auto k = static_cast<std::uint32_t>(prefix.size());
    if (k == 0) {
      if (!items) {
        if (min > 0) error(pointer + "/minItems", "the array takes no items");
        Sequence empty = b_.literal("[");
        append(empty, ws());
        append(empty, b_.literal("]"));
        return b_.choice({std::move(empty)});
      }
      return b_.choice({array_of(*items, min, max)});
    }
    if (!items && min > k) error(pointer + "/minItems", "is more than prefixItems allows without items");
    // A(i): the elements from index i on (i >= 1 needs a comma first).
    Sequence comma = b_.literal(",");
    append(comma, ws());
    Sequence after;  // A(k)
    if (items && (!max || *max > k)) {
      Sequence more = comma;
      more.push_back(*items);
      append(more, ws());
      after = b_.repeat({b_.choice({more})}, min > k ? min - k : 0, max ? std::optional(*max - k) : std::nullopt, pointer);
    }
    Sequence next = after;
    for (std::uint32_t i = k; i-- > 0;) {
      std::vector<Sequence> alternatives;
      if (!max || i < *max) {
        Sequence take = i > 0 ? comma : Sequence{};
        take.push_back(prefix[i]);
        append(take, ws());
        append(take, next);
        alternatives.push_back(std::move(take));
      }
      if (i >= min) alternatives.push_back({});
      next = {b_.choice(std::move(alternatives))};
    }
    Sequence array = b_.literal("[");
    append(array, ws());
    append(array, next);
    append(array, b_.literal("]"));
    return b_.choice({std::move(array)});
  }

  Element compile_string(const Json& s, const std::string& pointer) {
    const auto min = count(s, "minLength", pointer);
    const auto max = count(s, "maxLength", pointer);
    const auto pattern = s.find("pattern");
    const auto format = s.find("format");
    if (pattern != s.end() && format != s.end()) error(pointer + "/pattern", "'pattern' with 'format' is not supported");
    if ((min || max) && (pattern != s.end() || format != s.end())) {
      error(pointer + (min ? "/minLength" : "/maxLength"), "a length with 'pattern' or 'format' is not supported");
    }
    Sequence body;
    if (pattern != s.end()) {
      if (!pattern->is_string()) error(pointer + "/pattern", "must be a string");
      body = compile_regex(b_, pattern->get<std::string>(), {.json_string = true, .search = true}, path_ + pointer + "/pattern");
    } else if (format != s.end()) {
      if (!format->is_string()) error(pointer + "/format", "must be a string");
      const std::string regex = format_regex(format->get<std::string>(), pointer);
      body = compile_regex(b_, regex, {.json_string = true, .search = false}, path_ + pointer + "/format");
    } else if (min || max) {
      if (max && *max < min.value_or(0)) error(pointer + "/maxLength", "is below minLength");
      body = b_.repeat({string_char()}, min.value_or(0), max, path_ + pointer);
    } else {
      return any_string();
    }
    Sequence string = b_.literal("\"");
    append(string, body);
    append(string, b_.literal("\""));
    return b_.choice({std::move(string)});
  }

  std::string format_regex(const std::string& format, const std::string& pointer) {
    static const std::string kDate =
        "[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))";
    static const std::string kTime = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
    static const std::string kLabel = "[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?";
    static const std::string kOctet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
    if (format == "date") return kDate;
    if (format == "time") return kTime;
    if (format == "date-time") return kDate + "T" + kTime;
    if (format == "uuid") return "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";
    if (format == "email") return "[a-zA-Z0-9_%+-]{1,32}(\\.[a-zA-Z0-9_%+-]{1,32}){0,3}@(" + kLabel + "\\.){1,3}[a-zA-Z]{2,16}";
    if (format == "hostname") return kLabel + "(\\." + kLabel + "){0,2}";
    if (format == "ipv4") return kOctet + "\\." + kOctet + "\\." + kOctet + "\\." + kOctet;
    error(pointer + "/format", fmt::format("the format '{}' is not supported (date-time, date, time, uuid, email, hostname and ipv4 are)", format));
  }

  std::optional<double> bound(const Json& s, const char* key, const std::string& pointer) {
    auto it = s.find(key);
    if (it == s.end() || it->is_boolean()) return std::nullopt;
    if (!it->is_number()) error(pointer + "/" + key, "must be a number");
    return it->get<double>();
  }

  Element compile_integer(const Json& s, const std::string& pointer) {
    std::optional<double> lo = bound(s, "minimum", pointer), hi = bound(s, "maximum", pointer);
    std::optional<double> xlo = bound(s, "exclusiveMinimum", pointer), xhi = bound(s, "exclusiveMaximum", pointer);
    // Draft 4: exclusiveMinimum/Maximum true makes minimum/maximum exclusive.
    if (s.value("exclusiveMinimum", Json()).is_boolean() && s["exclusiveMinimum"].get<bool>() && lo) xlo = lo, lo.reset();
    if (s.value("exclusiveMaximum", Json()).is_boolean() && s["exclusiveMaximum"].get<bool>() && hi) xhi = hi, hi.reset();
    std::optional<std::int64_t> min, max;
    constexpr double kLimit = 9.0e18;
    auto clamp_check = [&](double v, const char* key) {
      if (!(std::fabs(v) < kLimit)) error(pointer + "/" + key, "is beyond the supported integer range (|x| < 9e18)");
    };
    if (lo) clamp_check(*lo, "minimum"), min = std::int64_t(std::ceil(*lo));
    if (xlo) {
      clamp_check(*xlo, "exclusiveMinimum");
      const auto v = std::int64_t(std::floor(*xlo)) + 1;
      min = min ? std::max(*min, v) : v;
    }
    if (hi) clamp_check(*hi, "maximum"), max = std::int64_t(std::floor(*hi));
    if (xhi) {
      clamp_check(*xhi, "exclusiveMaximum");
      const auto v = std::int64_t(std::ceil(*xhi)) - 1;
      max = max ? std::min(*max, v) : v;
    }
    if (min && max && *min > *max) error(pointer, "no integer lies within the bounds");
    if (!min && !max) return any_integer();
    return b_.choice({integer_range(b_, min, max)});
  }

  Element compile_number(const Json& s, const std::string& pointer) {
    for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(key)) {
        error(pointer + "/" + key, "bounds on a 'number' are not supported (they are on an 'integer')");
      }
    }
    return any_number();
  }

  static constexpr std::size_t kMaxLiteralBudget = std::size_t{1} << 18;

  const Json& root_;
  std::string path_;
  GrammarBuilder b_;
  std::optional<Element> ws_;
  std::optional<std::uint32_t> string_char_, string_, integer_, number_, value_, object_, array_;
  std::map<std::string, std::uint32_t> ref_rules_;
  std::vector<std::unique_ptr<Json>> merged_;  // allOf merges, alive while compiling
};

}  // namespace

Grammar json_schema_grammar(const nlohmann::ordered_json& schema, const std::string& path) {
  try {
    return SchemaCompiler(schema, path).compile_root();
  } catch (const nlohmann::json::exception& e) {
    // A keyword of the wrong JSON type somewhere the compiler read it as another.
    throw GrammarError(path, fmt::format("the schema is malformed ({})", e.what()));
  }
}

Grammar json_object_grammar() {
  static const nlohmann::ordered_json kNone = nlohmann::ordered_json::object();
  return SchemaCompiler(kNone, "").any_object_root();
}

}  // namespace flare::grammar
