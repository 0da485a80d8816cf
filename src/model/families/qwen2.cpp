// Qwen2ForCausalLM: Llama with biases on the q, k and v projections (none on o).
// Sliding-window layers (use_sliding_window) are not implemented.
#include <nlohmann/json.hpp>

#include "model/families/family.h"

namespace flare::model {

void configure_qwen2(const ConfigContext& config, ModelSpec& spec) {
  spec.qkv_bias = true;
  spec.o_bias = false;
  if (config.get_bool("use_sliding_window", false)) {
    config.reject("use_sliding_window", "Qwen2 sliding-window layers are not supported");
  }
  require_full_attention_layers(config);
}

}  // namespace flare::model
