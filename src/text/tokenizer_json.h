// Checked accessors for tokenizer.json / tokenizer_config.json objects: every missing or
// mistyped field becomes a flare::Error that names it, never an exception from the JSON library.
// Internal to src/text (includes nlohmann/json.hpp; include only from .cpp files).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "text/unicode_regex.h"

namespace flare::text {

// `config["type"]` as a string; `what` names the component in errors.
std::string json_type(const nlohmann::json& config, std::string_view what);
bool json_bool(const nlohmann::json& config, const char* key, bool fallback);
std::string json_string(const nlohmann::json& config, const char* key, std::string_view fallback);
const nlohmann::json& json_array(const nlohmann::json& config, const char* key, std::string_view what);
// The {"String": s} or {"Regex": r} object at config["pattern"], compiled.
Regex json_pattern(const nlohmann::json& config, std::string_view what);
// Same, also reporting whether it was a plain string.
Regex json_pattern(const nlohmann::json& config, std::string_view what, std::string* literal);

}  // namespace flare::text

namespace flare::text {

struct BpeData;
// Parses tokenizer.json. model.vocab and model.merges (hundreds of thousands of entries) are
// streamed into `data` instead of the document, where they are left as null.
nlohmann::json parse_tokenizer_document(std::string_view text, BpeData& data);

}  // namespace flare::text
