// Qwen3ForCausalLM: Llama plus a per-head RMSNorm of q and k (weight [head_dim]) before rotary.
// Sliding-window layers (use_sliding_window) are not implemented.
#include <nlohmann/json.hpp>

#include "model/families/family.h"

namespace flare::model {

void configure_qwen3(const ConfigContext& config, ModelSpec& spec) {
  spec.qk_norm = true;
  const bool attention_bias = config.get_bool("attention_bias", false);
  spec.qkv_bias = attention_bias;
  spec.o_bias = attention_bias;
  if (config.get_bool("use_sliding_window", false)) {
    config.reject("use_sliding_window", "Qwen3 sliding-window layers are not supported");
  }
  require_full_attention_layers(config);
}

}  // namespace flare::model
