// Qwen3MoeForCausalLM (Qwen3-30B-A3B, Qwen3-235B-A22B): Qwen3's attention (q/k head norms) and in
// every decoder_sparse_step-th layer not listed in mlp_only_layers a router over num_experts experts
// (num_local_experts in configs transformers 5 writes)
// of moe_intermediate_size, num_experts_per_tok of them a token, their probabilities renormalized
// when norm_topk_prob. Other layers keep a dense MLP of intermediate_size.
#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/architectures/config_context.h"
#include "model/architectures/moe_decoder.h"
#include "model/blocks.h"

namespace flare::model {
namespace {

constexpr ExpertNames k_names{"mlp.", "gate_proj", "up_proj", "down_proj"};

void configure(const ConfigContext& config, ModelSpec& spec) {
  spec.qk_norm = true;
  const bool attention_bias = config.get_bool("attention_bias", false);
  spec.qkv_bias = attention_bias;
  spec.o_bias = attention_bias;
  if (config.get_bool("use_sliding_window", false)) {
    config.reject("use_sliding_window", "Qwen3-MoE sliding-window layers are not supported");
  }
  require_full_attention_layers(config);
  // Hub configs name the expert count num_experts; transformers 5 writes num_local_experts.
  const std::string_view experts_field = config.has("num_experts") ? "num_experts" : "num_local_experts";
  spec.moe.n_experts = config.get_positive_int(experts_field);
  spec.moe.top_k = config.get_positive_int("num_experts_per_tok");
  spec.moe.expert_intermediate_size = config.get_positive_int("moe_intermediate_size");
  spec.moe.renormalize = config.get_bool("norm_topk_prob", false);
  moe_check(config, spec, experts_field, "num_experts_per_tok");
  if (config.has("shared_expert_intermediate_size") && config.get_positive_int("shared_expert_intermediate_size") > 0) {
    config.reject("shared_expert_intermediate_size", "shared experts are not supported");
  }
  const std::int32_t step = config.get_positive_int("decoder_sparse_step", 1);
  std::vector<std::int32_t> dense_layers;
  if (config.has("mlp_only_layers")) {
    const auto& list = config.json.at("mlp_only_layers");
    if (!list.is_array()) config.reject("mlp_only_layers", "must be a list of layer indices");
    for (const auto& index : list) {
      if (!index.is_number_integer() || index.get<std::int64_t>() < 0 || index.get<std::int64_t>() >= spec.n_layers) {
        config.reject("mlp_only_layers", fmt::format("{} is not a layer index below {}", index.dump(), spec.n_layers));
      }
      dense_layers.push_back(index.get<std::int32_t>());
    }
  }
  for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
    spec.layers[std::size_t(layer)].experts =
        std::ranges::find(dense_layers, layer) == dense_layers.end() && (layer + 1) % step == 0;
  }
}

WeightTable weight_table(const ModelSpec& spec) { return moe_weight_table(spec, k_names); }

}  // namespace

extern const Architecture k_qwen3_moe{"Qwen3MoeForCausalLM", configure, weight_table, moe_history, moe_plan_arena,
                                    moe_program, moe_kernel_needs};

}  // namespace flare::model
