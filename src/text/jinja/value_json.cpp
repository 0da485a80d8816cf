// Conversion from nlohmann::json to template values (see value_json.h).
#include "text/jinja/value_json.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace flare::text::jinja {

namespace {

// JavaScript orders "array index" keys (canonical integers below 2^32 - 1) first.
bool is_array_index(const std::string& key, uint64_t& index) {
  if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0')) return false;
  index = 0;
  for (char c : key) {
    if (c < '0' || c > '9') return false;
    index = index * 10 + static_cast<uint64_t>(c - '0');
  }
  return index < 4294967295ull;
}

template <typename Json>
Value convert(const Json& json, int depth, const JsonConversionLimits& limits) {
  if (depth > limits.max_depth) fail_input("JSON value nested deeper than {} levels", limits.max_depth);
  switch (json.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(json.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(json.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t value = json.template get<uint64_t>();
      if (value > static_cast<uint64_t>(INT64_MAX)) return Value::floating(static_cast<double>(value));
      return Value::integer(static_cast<int64_t>(value));
    }
    case nlohmann::json::value_t::number_float: {
      double value = json.template get<double>();
      if (std::isfinite(value) && std::floor(value) == value && std::fabs(value) < 9.0e15) {
        return Value::integer(static_cast<int64_t>(value));
      }
      return Value::floating(value);
    }
    case nlohmann::json::value_t::string: return Value::string(json.template get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(convert(item, depth + 1, limits));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      std::vector<std::pair<uint64_t, const std::string*>> index_keys;
      for (auto it = json.begin(); it != json.end(); ++it) {
        uint64_t index = 0;
        if (is_array_index(it.key(), index)) index_keys.emplace_back(index, &it.key());
      }
      std::sort(index_keys.begin(), index_keys.end());
      ValueMap map;
      for (const auto& entry : index_keys) map.set(*entry.second, convert(json.at(*entry.second), depth + 1, limits));
      for (auto it = json.begin(); it != json.end(); ++it) {
        uint64_t index = 0;
        if (!is_array_index(it.key(), index)) map.set(it.key(), convert(it.value(), depth + 1, limits));
      }
      return Value::map(std::move(map));
    }
    default: fail_input("unsupported JSON value in template context");
  }
}

}  // namespace

Value value_from_json(const nlohmann::ordered_json& json, const JsonConversionLimits& limits) {
  return convert(json, 0, limits);
}
Value value_from_json(const nlohmann::json& json, const JsonConversionLimits& limits) {
  return convert(json, 0, limits);
}

}  // namespace flare::text::jinja
