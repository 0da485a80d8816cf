// Limits and typed readers for untrusted JSON bodies (json_body.h).
#include "server/json_body.h"

#include <cmath>

namespace flare::server {

int32_t json_nesting_depth(std::string_view text, int32_t limit) {
  int32_t depth = 0;
  int32_t deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

json parse_json_body(std::string_view body, const JsonLimits& limits) {
  if (body.size() > limits.max_bytes) {
    throw ApiError(413, "", fmt::format("request body of {} bytes exceeds the limit of {} bytes", body.size(),
                                        limits.max_bytes));
  }
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) fail_field("", "request body is empty");
  if (json_nesting_depth(body, limits.max_depth) > limits.max_depth) {
    fail_field("", "JSON nesting exceeds {} levels", limits.max_depth);
  }
  try {
    return json::parse(body);
  } catch (const json::parse_error& error) {
    std::string what = error.what();
    auto colon = what.find("]: ");
    fail_field("", "malformed JSON: {}", colon == std::string::npos ? what : what.substr(colon + 3));
  }
}

const json& require_object(const json& body, const std::string& field) {
  if (!body.is_object()) fail_field(field, "must be a JSON object");
  return body;
}

std::string field_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

std::string index_path(const std::string& parent, size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

namespace {
const json* find(const json& object, const std::string& key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}
}  // namespace

std::optional<bool> get_bool(const json& object, const std::string& key, const std::string& path) {
  const json* value = find(object, key);
  if (!value) return std::nullopt;
  if (!value->is_boolean()) fail_field(field_path(path, key), "must be a boolean");
  return value->get<bool>();
}

std::optional<std::string> get_string(const json& object, const std::string& key, const std::string& path) {
  const json* value = find(object, key);
  if (!value) return std::nullopt;
  if (!value->is_string()) fail_field(field_path(path, key), "must be a string");
  return value->get<std::string>();
}

std::optional<int64_t> get_int(const json& object, const std::string& key, int64_t min, int64_t max,
                               const std::string& path) {
  const json* value = find(object, key);
  if (!value) return std::nullopt;
  std::string name = field_path(path, key);
  int64_t result = 0;
  if (value->is_number_integer()) {
    if (value->is_number_unsigned() && value->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail_field(name, "must be between {} and {}", min, max);
    }
    result = value->get<int64_t>();
  } else if (value->is_number_float()) {
    double number = value->get<double>();
    if (!std::isfinite(number) || number != std::floor(number)) fail_field(name, "must be an integer");
    if (number < static_cast<double>(min) || number > static_cast<double>(max)) {
      fail_field(name, "must be between {} and {}", min, max);
    }
    result = static_cast<int64_t>(number);
  } else {
    fail_field(name, "must be an integer");
  }
  if (result < min || result > max) fail_field(name, "must be between {} and {}", min, max);
  return result;
}

std::optional<double> get_number(const json& object, const std::string& key, double min, double max,
                                 const std::string& path) {
  const json* value = find(object, key);
  if (!value) return std::nullopt;
  std::string name = field_path(path, key);
  if (!value->is_number()) fail_field(name, "must be a number");
  double number = value->get<double>();
  if (!std::isfinite(number) || number < min || number > max) {
    fail_field(name, "must be between {} and {}", min, max);
  }
  return number;
}

}  // namespace flare::server
