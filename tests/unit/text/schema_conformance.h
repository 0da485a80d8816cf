// A test-side check that a JSON value follows a tool schema, written from the subset that
// tool schemas commonly use (independently of the grammar compiler): the tests of the recognizer and
// of forced tool calls judge generated arguments with it. A subschema with a keyword outside the
// subset accepts anything, as the recognizer's fallback does.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace flare::testing {

inline bool schema_is_supported(const nlohmann::ordered_json& schema) {
  static const char* known[] = {"type", "properties", "required", "additionalProperties", "items", "enum", "const",
                                "description", "title", "default", "examples", "format", "$schema", "$id",
                                "$comment", "deprecated", "readOnly", "writeOnly"};
  if (!schema.is_object()) return false;
  for (const auto& [keyword, value] : schema.items()) {
    if (std::find(std::begin(known), std::end(known), keyword) == std::end(known)) return false;
  }
  return true;
}

inline bool has_type(const nlohmann::ordered_json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  if (type == "integer") {
    return value.is_number_integer() || (value.is_number_float() && std::floor(value.get<double>()) == value.get<double>());
  }
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  return false;
}

// Whether `value` follows `schema` (the supported subset; anything else passes).
inline bool conforms(const nlohmann::ordered_json& schema, const nlohmann::ordered_json& value) {
  if (!schema_is_supported(schema)) return true;
  if (auto type = schema.find("type"); type != schema.end()) {
    if (type->is_string() && !has_type(value, *type)) return false;
    if (type->is_array() && std::none_of(type->begin(), type->end(), [&](const auto& t) {
          return t.is_string() && has_type(value, t);
        })) {
      return false;
    }
  }
  if (auto values = schema.find("enum"); values != schema.end() && values->is_array()) {
    if (std::find(values->begin(), values->end(), value) == values->end()) return false;
  }
  if (auto constant = schema.find("const"); constant != schema.end() && *constant != value) return false;
  if (value.is_object()) {
    auto properties = schema.find("properties");
    auto additional = schema.find("additionalProperties");
    const bool open = additional != schema.end() && !(additional->is_boolean() && !additional->get<bool>());
    const bool closed = !open && (properties != schema.end() || additional != schema.end());
    if (auto required = schema.find("required"); required != schema.end() && required->is_array() && closed) {
      for (const auto& name : *required) {
        if (name.is_string() && !value.contains(name.get<std::string>())) return false;
      }
    }
    for (const auto& [key, item] : value.items()) {
      if (!closed) continue;
      if (properties == schema.end() || !properties->contains(key)) return false;
      if (!conforms((*properties)[key], item)) return false;
    }
  }
  if (value.is_array()) {
    if (auto items = schema.find("items"); items != schema.end() && items->is_object()) {
      for (const auto& item : value) {
        if (!conforms(*items, item)) return false;
      }
    }
  }
  return true;
}

}  // namespace flare::testing
