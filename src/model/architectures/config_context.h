// What an architecture file reads its own config.json fields with: the parsed JSON, its origin for
// messages, and strict getters that throw flare::Error (preparation) naming the field. The shared
// fields (sizes, rope, norms, activation, quantization) are read before by config.cpp. Internal to
// src/model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "model/spec.h"

namespace flare::model {

struct ConfigContext {
  const nlohmann::json& json;
  std::string_view origin;

  bool has(std::string_view key) const;  // present and not null
  bool get_bool(std::string_view key, bool fallback) const;
  std::int32_t get_positive_int(std::string_view key) const;  // required
  std::int32_t get_positive_int(std::string_view key, std::int32_t fallback) const;
  double get_number(std::string_view key, double fallback) const;
  [[noreturn]] void reject(std::string_view key, std::string_view why) const;
};

// layer_types, when present, must all be "full_attention" (or one of `also`).
void require_full_attention_layers(const ConfigContext& config, std::string_view also = {});

// Reads one rope dict (rope_scaling, rope_parameters or one of its per-layer-type entries) into
// `rope`, over what `rope` already holds; `origin` names it in errors.
void rope_parse(const nlohmann::json& dict, const std::string& origin, RopeSpec& rope);

}  // namespace flare::model
