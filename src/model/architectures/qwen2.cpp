// Qwen2ForCausalLM: Llama with biases on the q, k and v projections (none on o).
// Sliding-window layers (use_sliding_window) are not implemented.
#include <nlohmann/json.hpp>

#include "model/architectures/config_context.h"
#include "model/architectures/dense_decoder.h"
#include "model/blocks.h"

namespace flare::model {
namespace {

void configure(const ConfigContext& config, ModelSpec& spec) {
  dense_check(config, spec);
  spec.qkv_bias = true;
  spec.o_bias = false;
  if (config.get_bool("use_sliding_window", false)) {
    config.reject("use_sliding_window", "Qwen2 sliding-window layers are not supported");
  }
  require_full_attention_layers(config);
}

}  // namespace

extern const Architecture k_qwen2{"Qwen2ForCausalLM", configure, dense_weight_table, dense_history,
                                  dense_plan_arena, dense_program, paged_attention_kernel_needs};

}  // namespace flare::model
