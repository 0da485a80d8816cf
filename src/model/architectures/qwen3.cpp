// Qwen3ForCausalLM: Llama plus a per-head RMSNorm of q and k (weight [head_dim]) before rotary.
// Sliding-window layers (use_sliding_window) are not implemented.
#include <nlohmann/json.hpp>

#include "model/architectures/config_context.h"
#include "model/architectures/dense_decoder.h"
#include "model/blocks.h"

namespace flare::model {
namespace {

void configure(const ConfigContext& config, ModelSpec& spec) {
  dense_check(config, spec);
  spec.qk_norm = true;
  const bool attention_bias = config.get_bool("attention_bias", false);
  spec.qkv_bias = attention_bias;
  spec.o_bias = attention_bias;
  if (config.get_bool("use_sliding_window", false)) {
    config.reject("use_sliding_window", "Qwen3 sliding-window layers are not supported");
  }
  require_full_attention_layers(config);
}

}  // namespace

extern const Architecture k_qwen3{"Qwen3ForCausalLM", configure, dense_weight_table, dense_history,
                                  dense_plan_arena, dense_program, paged_attention_kernel_needs};

}  // namespace flare::model
