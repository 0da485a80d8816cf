// LlamaForCausalLM: the plain dense GQA decoder. attention_bias puts biases on q, k, v and o;
// mlp_bias is not implemented.
#include <nlohmann/json.hpp>

#include "model/architectures/config_context.h"
#include "model/architectures/dense_decoder.h"
#include "model/blocks.h"

namespace flare::model {
namespace {

void configure(const ConfigContext& config, ModelSpec& spec) {
  dense_check(config, spec);
  const bool attention_bias = config.get_bool("attention_bias", false);
  spec.qkv_bias = attention_bias;
  spec.o_bias = attention_bias;
  if (config.get_bool("mlp_bias", false)) config.reject("mlp_bias", "MLP biases are not supported");
  require_full_attention_layers(config);
}

}  // namespace

extern const Architecture k_llama{"LlamaForCausalLM", configure, dense_weight_table, dense_history,
                                  dense_plan_arena, dense_program, paged_attention_kernel_needs};

}  // namespace flare::model
