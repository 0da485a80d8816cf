// Function tools as the TypeScript-like declarations harmony's developer message carries
// (harmony.h): `type NAME = (_: { ... }) => any;`, descriptions as // comments on the line
// above, optional fields marked with ?, enums as unions, defaults as trailing comments.
#include "text/harmony.h"

#include <algorithm>

namespace flare::text {

namespace {

using nlohmann::ordered_json;

// Each line of a description as a // comment.
std::string comment_lines(std::string_view text, const std::string& indent) {
  std::string out;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    out += indent + "// " + std::string(text.substr(begin, end - begin)) + "\n";
    begin = end + 1;
  }
  return out;
}

std::string join_union(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) {
    if (!out.empty()) out += " | ";
    out += part;
  }
  return out;
}

std::string type_name(const ordered_json& schema, const std::string& type, int depth) {
  if (type == "string") return "string";
  if (type == "number" || type == "integer") return "number";
  if (type == "boolean") return "boolean";
  if (type == "null") return "null";
  if (type == "array") {
    if (!schema.contains("items")) return "any[]";
    std::string item = harmony_typescript_type(schema["items"], depth);
    return item.find(" | ") != std::string::npos ? "(" + item + ")[]" : item + "[]";
  }
  if (type == "object") {
    if (!schema.contains("properties") || !schema["properties"].is_object() || schema["properties"].empty()) {
      return "object";
    }
    return harmony_typescript_type(schema, depth);
  }
  return "any";
}

std::string default_comment(const ordered_json& value) {
  return " // default: " + (value.is_string() ? value.get<std::string>() : value.dump());
}

// "{\n// desc\nname?: type,\n}" with fields indented by depth (top level: none).
std::string object_body(const ordered_json& schema, int depth) {
  std::string indent(static_cast<size_t>(depth) * 2, ' ');
  std::vector<std::string> required;
  if (schema.contains("required") && schema["required"].is_array()) {
    for (const auto& name : schema["required"]) {
      if (name.is_string()) required.push_back(name.get<std::string>());
    }
  }
  std::string out = "{\n";
  for (const auto& [name, property] : schema["properties"].items()) {
    if (property.is_object() && property.contains("description") && property["description"].is_string()) {
      out += comment_lines(property["description"].get<std::string>(), indent);
    }
    bool is_required = std::find(required.begin(), required.end(), name) != required.end();
    out += indent + name + (is_required ? ": " : "?: ") + harmony_typescript_type(property, depth + 1) + ",";
    if (property.is_object() && property.contains("default")) out += default_comment(property["default"]);
    out += "\n";
  }
  std::string closing_indent(depth > 0 ? static_cast<size_t>(depth - 1) * 2 : 0, ' ');
  return out + closing_indent + "}";
}

}  // namespace

std::string harmony_typescript_type(const ordered_json& schema, int depth) {
  if (!schema.is_object()) return "any";
  if (schema.contains("enum") && schema["enum"].is_array() && !schema["enum"].empty()) {
    std::vector<std::string> parts;
    for (const auto& value : schema["enum"]) parts.push_back(value.dump());
    return join_union(parts);
  }
  if (schema.contains("const")) return schema["const"].dump();
  for (const char* key : {"anyOf", "oneOf"}) {
    if (schema.contains(key) && schema[key].is_array() && !schema[key].empty()) {
      std::vector<std::string> parts;
      for (const auto& option : schema[key]) parts.push_back(harmony_typescript_type(option, depth));
      return join_union(parts);
    }
  }
  std::string result;
  if (schema.contains("properties") && schema["properties"].is_object() && !schema["properties"].empty()) {
    result = object_body(schema, depth);
  } else if (schema.contains("type") && schema["type"].is_string()) {
    result = type_name(schema, schema["type"].get<std::string>(), depth);
  } else if (schema.contains("type") && schema["type"].is_array()) {
    std::vector<std::string> parts;
    for (const auto& type : schema["type"]) {
      if (type.is_string()) parts.push_back(type_name(schema, type.get<std::string>(), depth));
    }
    result = parts.empty() ? "any" : join_union(parts);
  } else {
    result = "any";
  }
  if (schema.value("nullable", false) && result != "null") result += " | null";
  return result;
}

std::string harmony_functions_namespace(const std::vector<HarmonyTool>& tools) {
  std::string out = "namespace functions {\n\n";
  for (const auto& tool : tools) {
    if (!tool.description.empty()) out += comment_lines(tool.description, "");
    out += "type " + tool.name + " = ";
    const ordered_json& parameters = tool.parameters;
    bool has_fields = parameters.is_object() && parameters.contains("properties") &&
                      parameters["properties"].is_object() && !parameters["properties"].empty();
    out += has_fields ? "(_: " + harmony_typescript_type(parameters, 0) + ") => any;\n\n" : "() => any;\n\n";
  }
  return out + "} // namespace functions";
}

}  // namespace flare::text
