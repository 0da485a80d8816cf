// Structured-output request fields (structured_output_fields.h).
#include "server/structured_output_fields.h"

#include <algorithm>
#include <vector>

namespace flare::server {
namespace {

using Kind = grammar::ConstraintSpec::Kind;

// A schema given as an object, a boolean, or (vLLM allows it) its JSON text.
json read_schema(const json& value, const std::string& field) {
  if (value.is_object() || value.is_boolean()) return value;
  if (value.is_string()) {
    try {
      return parse_json_body(value.get<std::string>(), JsonLimits{});
    } catch (const ApiError& e) {
      fail_field(field, "is not a valid JSON schema text ({})", e.what());
    }
  }
  fail_field(field, "must be a JSON schema (an object)");
}

std::string read_text(const json& value, const std::string& field) {
  if (!value.is_string() || value.get<std::string>().empty()) fail_field(field, "must be a non-empty string");
  return value.get<std::string>();
}

std::vector<std::string> read_choices(const json& value, const std::string& field) {
  if (!value.is_array() || value.empty()) fail_field(field, "must be a non-empty array of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) fail_field(index_path(field, i), "must be a string");
    out.push_back(value[i].get<std::string>());
  }
  return out;
}

grammar::ConstraintSpec spec_of(Kind kind, const json& value, const std::string& field) {
  grammar::ConstraintSpec spec;
  spec.kind = kind;
  spec.path = field;
  switch (kind) {
    case Kind::json_schema:
      spec.schema = read_schema(value, field);
      break;
    case Kind::json_object:
      break;
    case Kind::regex:
    case Kind::gbnf:
      spec.text = read_text(value, field);
      break;
    case Kind::choice:
      spec.choices = read_choices(value, field);
      break;
  }
  return spec;
}

// {"type": "json_object"} / {"type": "json_schema", ...}; `nested`: the schema's object is under
// "json_schema" (Chat Completions) rather than beside "type" (Responses).
std::optional<grammar::ConstraintSpec> read_format(const json& format, const std::string& field, bool nested) {
  require_object(format, field);
  const std::string type = get_string(format, "type", field).value_or("");
  if (type == "text") return std::nullopt;
  if (type == "json_object") return spec_of(Kind::json_object, format, field);
  if (type != "json_schema") fail_field(field_path(field, "type"), "must be 'text', 'json_object' or 'json_schema'");
  const json* holder = &format;
  std::string holder_field = field;
  if (nested) {
    auto it = format.find("json_schema");
    if (it == format.end() || !it->is_object()) fail_field(field_path(field, "json_schema"), "is required (an object with 'schema')");
    holder = &*it;
    holder_field = field_path(field, "json_schema");
  }
  get_string(*holder, "name", holder_field);
  get_bool(*holder, "strict", holder_field);
  auto schema = holder->find("schema");
  if (schema == holder->end() || schema->is_null()) return spec_of(Kind::json_schema, json::object(), field_path(holder_field, "schema"));
  return spec_of(Kind::json_schema, *schema, field_path(holder_field, "schema"));
}

}  // namespace

std::optional<grammar::ConstraintSpec> read_structured_output(const json& body, StructuredOutputApi api) {
  std::vector<grammar::ConstraintSpec> found;
  std::vector<std::string> fields;
  auto take = [&](std::optional<grammar::ConstraintSpec> spec, const std::string& field) {
    if (!spec) return;
    if (!found.empty()) fail_field(field, "cannot be combined with '{}' (a request has one output constraint)", fields[0]);
    found.push_back(std::move(*spec));
    fields.push_back(field);
  };
  auto present = [&](const char* key) -> const json* {
    auto it = body.find(key);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  };
  if (api == StructuredOutputApi::responses) {
    if (const json* text = present("text")) {
      require_object(*text, "text");
      if (auto format = text->find("format"); format != text->end() && !format->is_null()) {
        take(read_format(*format, "text.format", false), "text.format");
      }
    }
  } else if (const json* format = present("response_format")) {
    take(read_format(*format, "response_format", true), "response_format");
  }
  if (const json* so = present("structured_outputs")) {
    require_object(*so, "structured_outputs");
    static const std::pair<const char*, Kind> kKeys[] = {
        {"json", Kind::json_schema}, {"regex", Kind::regex}, {"choice", Kind::choice}, {"grammar", Kind::gbnf}};
    for (const auto& [key, kind] : kKeys) {
      auto it = so->find(key);
      if (it != so->end() && !it->is_null()) take(spec_of(kind, *it, field_path("structured_outputs", key)), field_path("structured_outputs", key));
    }
    if (get_bool(*so, "json_object", "structured_outputs").value_or(false)) {
      take(spec_of(Kind::json_object, *so, "structured_outputs.json_object"), "structured_outputs.json_object");
    }
    for (const auto& [key, value] : so->items()) {
      static const std::vector<std::string> kKnown = {"json", "regex", "choice", "grammar", "json_object"};
      if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end() && !value.is_null()) {
        fail_field(field_path("structured_outputs", key), "is not supported (json, regex, choice, grammar and json_object are)");
      }
    }
  }
  static const std::pair<const char*, Kind> kFlat[] = {{"guided_json", Kind::json_schema}, {"guided_regex", Kind::regex},
                                                       {"guided_choice", Kind::choice},    {"guided_grammar", Kind::gbnf},
                                                       {"grammar", Kind::gbnf},            {"json_schema", Kind::json_schema}};
  for (const auto& [key, kind] : kFlat) {
    if (const json* value = present(key)) take(spec_of(kind, *value, key), key);
  }
  if (found.empty()) return std::nullopt;
  return std::move(found[0]);
}

}  // namespace flare::server
