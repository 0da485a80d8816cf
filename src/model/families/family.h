// The architecture registry: one entry per Hugging Face architecture, each defined in its own file
// (llama.cpp, qwen3.cpp, qwen2.cpp, mistral.cpp). An entry reads the family's own config fields into
// the spec (flags, weight names) and rejects what the family's forward pass does not implement.
// The shared fields (sizes, rope, norms) are read before by config.cpp. Nothing else switches on
// the architecture. Internal to src/model.
#pragma once

#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "model/spec.h"

namespace flare::model {

struct ConfigContext;  // the parsed config.json and its origin, for error messages

struct Family {
  std::string_view architecture;
  void (*configure)(const ConfigContext& config, ModelSpec& spec);
};

const Family* family_find(std::string_view architecture);
std::string family_list();  // "LlamaForCausalLM, ..." for messages

// Helpers for family files: each throws flare::Error (preparation) naming `origin` and the field.
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

void configure_llama(const ConfigContext& config, ModelSpec& spec);
void configure_qwen3(const ConfigContext& config, ModelSpec& spec);
void configure_qwen2(const ConfigContext& config, ModelSpec& spec);
void configure_mistral(const ConfigContext& config, ModelSpec& spec);

// Shared by families: layer_types, when present, must all be "full_attention" (or one of `also`).
void require_full_attention_layers(const ConfigContext& config, std::string_view also = {});

}  // namespace flare::model
