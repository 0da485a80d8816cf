// Untrusted JSON bodies: size and nesting limits checked before parsing, and typed field
// readers that answer every wrong type or out-of-range value with a 400 naming the field.
// Bodies keep the key order the client wrote (ordered_json): tool schemas and call arguments
// reach the chat template, whose `tojson` prints them in that order, as the model was trained.
// Included only by the adapter .cpp files (it brings nlohmann/json.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace flare::server {

using json = nlohmann::ordered_json;

struct JsonLimits {
  size_t max_bytes = 8u << 20;
  int32_t max_depth = 64;
};

// Rejects bodies over the limits (413 / 400) and malformed JSON (400), then parses.
json parse_json_body(std::string_view body, const JsonLimits& limits);
// The deepest nesting of arrays/objects in `text`, stopping early once above `limit`.
int32_t json_nesting_depth(std::string_view text, int32_t limit);

// The body must be an object.
const json& require_object(const json& body, const std::string& field);

// Typed optional fields of an object: absent or null yields nullopt; a wrong type fails.
std::optional<bool> get_bool(const json& object, const std::string& key, const std::string& path = {});
std::optional<std::string> get_string(const json& object, const std::string& key, const std::string& path = {});
std::optional<int64_t> get_int(const json& object, const std::string& key, int64_t min, int64_t max,
                               const std::string& path = {});
std::optional<double> get_number(const json& object, const std::string& key, double min, double max,
                                 const std::string& path = {});
// Field path for messages: join("messages[2]", "content") -> "messages[2].content".
std::string field_path(const std::string& parent, const std::string& key);
std::string index_path(const std::string& parent, size_t index);

}  // namespace flare::server
