// Checked JSON accessors for the tokenizer loaders (see tokenizer_json.h).
#include "text/tokenizer_json.h"

#include "common/error.h"

namespace flare::text {

std::string json_type(const nlohmann::json& config, std::string_view what) {
  if (!config.is_object()) fail_input("tokenizer.json: {} must be an object", what);
  auto it = config.find("type");
  if (it == config.end() || !it->is_string()) fail_input("tokenizer.json: {} has no string \"type\"", what);
  return it->get<std::string>();
}

bool json_bool(const nlohmann::json& config, const char* key, bool fallback) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail_input("tokenizer.json: field {:?} must be a boolean", key);
  return it->get<bool>();
}

std::string json_string(const nlohmann::json& config, const char* key, std::string_view fallback) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::string(fallback);
  if (!it->is_string()) fail_input("tokenizer.json: field {:?} must be a string", key);
  return it->get<std::string>();
}

const nlohmann::json& json_array(const nlohmann::json& config, const char* key, std::string_view what) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_array()) fail_input("tokenizer.json: {} needs an array {:?}", what, key);
  return *it;
}

Regex json_pattern(const nlohmann::json& config, std::string_view what, std::string* literal) {
  auto it = config.find("pattern");
  if (it == config.end() || !it->is_object()) fail_input("tokenizer.json: {} needs a \"pattern\" object", what);
  if (auto s = it->find("String"); s != it->end() && s->is_string()) {
    if (literal != nullptr) *literal = s->get<std::string>();
    return Regex::literal(s->get<std::string>());
  }
  if (auto r = it->find("Regex"); r != it->end() && r->is_string()) return Regex(r->get<std::string>());
  fail_input("tokenizer.json: {} pattern must be {{\"String\": ...}} or {{\"Regex\": ...}}", what);
}

Regex json_pattern(const nlohmann::json& config, std::string_view what) {
  return json_pattern(config, what, nullptr);
}

}  // namespace flare::text
