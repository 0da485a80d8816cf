// MistralForCausalLM: Llama whose every layer attends to the last `sliding_window` positions
// (null: full attention).
#include <nlohmann/json.hpp>

#include "model/families/family.h"

namespace flare::model {

void configure_mistral(const ConfigContext& config, ModelSpec& spec) {
  spec.sliding_window = config.has("sliding_window") ? config.get_positive_int("sliding_window") : 0;
  if (config.get_bool("attention_bias", false)) config.reject("attention_bias", "Mistral attention biases are not supported");
  require_full_attention_layers(config, "sliding_attention");
}

}  // namespace flare::model
