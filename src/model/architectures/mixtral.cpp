// MixtralForCausalLM: Mistral's attention (every layer sliding over the last `sliding_window`
// positions, or full when null) and in every layer a router over num_local_experts experts of
// intermediate_size, num_experts_per_tok of them a token, weighted by a softmax over the chosen ones.
#include <nlohmann/json.hpp>

#include "model/architectures/config_context.h"
#include "model/architectures/moe_decoder.h"
#include "model/blocks.h"

namespace flare::model {
namespace {

constexpr ExpertNames k_names{"block_sparse_moe.", "w1", "w3", "w2"};

void configure(const ConfigContext& config, ModelSpec& spec) {
  const std::int32_t window = config.has("sliding_window") ? config.get_positive_int("sliding_window") : 0;
  if (config.get_bool("attention_bias", false)) config.reject("attention_bias", "Mixtral attention biases are not supported");
  require_full_attention_layers(config, "sliding_attention");
  spec.moe.n_experts = config.get_positive_int("num_local_experts");
  spec.moe.top_k = config.get_positive_int("num_experts_per_tok");
  spec.moe.expert_intermediate_size = spec.intermediate_size;
  spec.moe.renormalize = true;
  moe_check(config, spec, "num_local_experts", "num_experts_per_tok");
  for (LayerSpec& layer : spec.layers) {
    layer.sliding_window = window;
    layer.experts = true;
  }
}

WeightTable weight_table(const ModelSpec& spec) { return moe_weight_table(spec, k_names); }

}  // namespace

extern const Architecture k_mixtral{"MixtralForCausalLM", configure, weight_table, moe_history, moe_plan_arena,
                                    moe_program, moe_kernel_needs};

}  // namespace flare::model
