// LlamaForCausalLM: the plain dense GQA decoder. attention_bias puts biases on q, k, v and o;
// mlp_bias is not implemented.
#include <nlohmann/json.hpp>

#include "model/families/family.h"

namespace flare::model {

void configure_llama(const ConfigContext& config, ModelSpec& spec) {
  const bool attention_bias = config.get_bool("attention_bias", false);
  spec.qkv_bias = attention_bias;
  spec.o_bias = attention_bias;
  if (config.get_bool("mlp_bias", false)) config.reject("mlp_bias", "MLP biases are not supported");
  require_full_attention_layers(config);
}

}  // namespace flare::model
