// The tool-schema subset compiled for the JSON recognizer (json_schema.h).
#include "text/json_schema.h"

#include <algorithm>
#include <bit>
#include <string_view>

namespace flare::text {
namespace {

using json = nlohmann::ordered_json;

// Keywords that describe without constraining: ignored. Any keyword outside these and the
// supported ones makes its subschema free (it may constrain in a way the recognizer cannot).
bool is_annotation(std::string_view keyword) {
  for (std::string_view k : {"description", "title", "default", "examples", "format", "$schema", "$id", "$comment",
                             "deprecated", "readOnly", "writeOnly"}) {
    if (keyword == k) return true;
  }
  return false;
}

bool is_supported(std::string_view keyword) {
  for (std::string_view k : {"type", "properties", "required", "additionalProperties", "items", "enum", "const"}) {
    if (keyword == k) return true;
  }
  return false;
}

uint8_t type_bit(const json& name) {
  if (!name.is_string()) return 0;
  const auto& s = name.get_ref<const std::string&>();
  if (s == "object") return JsonSchema::object;
  if (s == "array") return JsonSchema::array;
  if (s == "string") return JsonSchema::string;
  if (s == "number") return JsonSchema::number;
  if (s == "integer") return JsonSchema::integer;
  if (s == "boolean") return JsonSchema::boolean;
  if (s == "null") return JsonSchema::null;
  return 0;
}

bool value_has_type(const json& value, uint8_t types) {
  switch (value.type()) {
    case json::value_t::string: return types & JsonSchema::string;
    case json::value_t::boolean: return types & JsonSchema::boolean;
    case json::value_t::null: return types & JsonSchema::null;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return types & (JsonSchema::number | JsonSchema::integer);
    case json::value_t::number_float: return types & JsonSchema::number;
    default: return false;
  }
}

// The text a key or enum value must be written as: compact, non-ASCII escaped (every byte then
// has a single-byte token to close it with).
std::string canonical(const json& value) { return value.dump(-1, ' ', true); }

}  // namespace

std::shared_ptr<const JsonSchema> JsonSchema::compile(const json& schema) {
  auto compiled = std::make_shared<JsonSchema>();
  if (compiled->compile_node(schema, 0) != 0) return nullptr;
  const Node& root = compiled->nodes_[0];
  if (root.types != object || !root.enum_texts.empty()) return nullptr;
  compiled->finish();
  return compiled;
}

int32_t JsonSchema::compile_node(const json& schema, int depth) {
  if (!schema.is_object() || depth > kMaxDepth || nodes_.size() >= kMaxNodes) return kFree;
  for (const auto& [keyword, value] : schema.items()) {
    if (!is_supported(keyword) && !is_annotation(keyword)) return kFree;
  }
  Node node;
  if (auto it = schema.find("type"); it != schema.end()) {
    node.types = 0;
    if (it->is_array()) {
      for (const auto& name : *it) {
        if (type_bit(name) == 0) return kFree;
        node.types |= type_bit(name);
      }
    } else {
      node.types = type_bit(*it);
    }
    if (node.types == 0) return kFree;
    if (node.types & number) node.types |= integer;  // every integer is a number
  } else if (schema.contains("properties") || schema.contains("required") ||
             schema.contains("additionalProperties")) {
    node.types = object;
  } else if (schema.contains("items")) {
    node.types = array;
  }

  auto enum_it = schema.find("enum");
  auto const_it = schema.find("const");
  if (enum_it != schema.end() || const_it != schema.end()) {
    if (enum_it != schema.end() && const_it != schema.end()) return kFree;
    const json values = const_it != schema.end() ? json::array({*const_it}) : *enum_it;
    if (!values.is_array() || values.empty() || values.size() > kMaxEnumValues) return kFree;
    for (const auto& value : values) {
      if (value.is_object() || value.is_array() || value.is_binary()) return kFree;
      if (!value_has_type(value, node.types)) continue;  // "type" narrows the enum
      std::string text;
      try {
        text = canonical(value);
      } catch (const json::exception&) {
        return kFree;  // invalid UTF-8
      }
      if (text.size() > kMaxLiteralBytes) return kFree;
      if (std::find(node.enum_texts.begin(), node.enum_texts.end(), text) == node.enum_texts.end()) {
        node.enum_texts.push_back(std::move(text));
      }
    }
    if (node.enum_texts.empty()) return kFree;  // nothing satisfies it: do not constrain
    node.completion_text = kMaxLiteralBytes;  // the shortest value, as JsonPrefix::completion() picks
    for (const auto& text : node.enum_texts) node.completion_text = std::min(node.completion_text, text.size());
    nodes_.push_back(std::move(node));
    return static_cast<int32_t>(nodes_.size() - 1);
  }
  if (node.types == kAnyType) return kFree;  // nothing constrains the value

  const auto id = static_cast<int32_t>(nodes_.size());
  nodes_.emplace_back();  // reserved: children are compiled after it
  if (node.types & object) {
    auto properties = schema.find("properties");
    auto required = schema.find("required");
    auto additional = schema.find("additionalProperties");
    if (properties != schema.end() && (!properties->is_object() || properties->size() > kMaxProperties)) {
      nodes_.pop_back();
      return kFree;
    }
    if (required != schema.end() && !required->is_array()) {
      nodes_.pop_back();
      return kFree;
    }
    const bool open = additional != schema.end() && !(additional->is_boolean() && !additional->get<bool>());
    node.closed = !open && (properties != schema.end() || additional != schema.end());
    if (node.closed && properties != schema.end()) {
      for (const auto& [name, subschema] : properties->items()) {
        std::string text = canonical(json(name));
        if (text.size() > kMaxLiteralBytes) {
          nodes_.resize(static_cast<size_t>(id));
          return kFree;
        }
        node.keys.push_back(std::move(text));
        node.key_nodes.push_back(compile_node(subschema, depth + 1));
      }
    }
    if (node.closed && required != schema.end()) {
      for (const auto& name : *required) {
        if (!name.is_string()) {
          nodes_.resize(static_cast<size_t>(id));
          return kFree;
        }
        auto at = std::find(node.keys.begin(), node.keys.end(), canonical(name));
        if (at == node.keys.end()) {  // a required key that may not be written: unsatisfiable
          nodes_.resize(static_cast<size_t>(id));
          return kFree;
        }
        node.required |= uint64_t{1} << (at - node.keys.begin());
      }
    }
  }
  if (node.types & array) {
    if (auto items = schema.find("items"); items != schema.end()) {
      if (!items->is_object()) {  // tuple forms
        nodes_.resize(static_cast<size_t>(id));
        return kFree;
      }
      node.items = compile_node(*items, depth + 1);
    }
  }
  // The completion of the value from its start, with the type JsonPrefix::completion() picks
  // (a number, else a string, an array, an object, true, null); an object writes its required keys.
  auto text_of = [&](int32_t child) { return child == kFree ? size_t{1} : nodes_[size_t(child)].completion_text; };
  size_t object_text = 2;
  for (size_t i = 0; i < node.keys.size(); ++i) {
    if (node.required >> i & 1) object_text += node.keys[i].size() + 2 + text_of(node.key_nodes[i]);  // ':' ','
  }
  if (node.types & (number | integer)) node.completion_text = 1;
  else if (node.types & (string | array)) node.completion_text = 2;
  else if (node.types & object) node.completion_text = object_text;
  else node.completion_text = 4;
  // The model may pick another allowed type: its completion can be the object's.
  if (node.types & object) longest_value_text_ = std::max(longest_value_text_, object_text);
  nodes_[static_cast<size_t>(id)] = std::move(node);
  return id;
}

void JsonSchema::finish() {
  // One byte can switch the value being written to another of its schema's choices (a longer
  // key or enum value, an object with required keys instead of a number) or open a new key.
  size_t longest_literal = 0;
  bool seen[256] = {};
  for (const Node& node : nodes_) {
    for (const auto* texts : {&node.keys, &node.enum_texts}) {
      for (const auto& text : *texts) {
        longest_literal = std::max(longest_literal, text.size());
        for (char c : text) seen[static_cast<unsigned char>(c)] = true;
      }
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (seen[b]) literal_bytes_.push_back(static_cast<char>(b));
  }
  max_growth_ = 8 + 2 * longest_literal + 2 * longest_value_text_;
}

}  // namespace flare::text
