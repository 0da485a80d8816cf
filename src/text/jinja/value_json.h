// Conversion from nlohmann::json to template values, kept out of the interpreter's headers
// so that only the code that builds a render context pays for nlohmann/json.hpp.
// Conversion follows JavaScript: integral numbers become integers, object keys that are
// array indices ("0", "1", ...) come first in ascending order, then the others in order.
#pragma once

#include <nlohmann/json.hpp>

#include "text/jinja/value.h"

namespace flare::text::jinja {

struct JsonConversionLimits {
  int max_depth = 128;
};

Value value_from_json(const nlohmann::ordered_json& json, const JsonConversionLimits& limits = {});
Value value_from_json(const nlohmann::json& json, const JsonConversionLimits& limits = {});

}  // namespace flare::text::jinja
