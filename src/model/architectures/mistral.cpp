// MistralForCausalLM: Llama whose every layer attends to the last `sliding_window` positions
// (null: full attention).
#include <nlohmann/json.hpp>

#include "model/architectures/config_context.h"
#include "model/architectures/dense_decoder.h"
#include "model/blocks.h"

namespace flare::model {
namespace {

void configure(const ConfigContext& config, ModelSpec& spec) {
  dense_check(config, spec);
  const std::int32_t window = config.has("sliding_window") ? config.get_positive_int("sliding_window") : 0;
  for (LayerSpec& layer : spec.layers) layer.sliding_window = window;
  if (config.get_bool("attention_bias", false)) config.reject("attention_bias", "Mistral attention biases are not supported");
  require_full_attention_layers(config, "sliding_attention");
}

}  // namespace

extern const Architecture k_mistral{"MistralForCausalLM", configure, dense_weight_table, dense_history,
                                  dense_plan_arena, dense_program, paged_attention_kernel_needs};

}  // namespace flare::model
