// GptOssForCausalLM (gpt-oss-20b, gpt-oss-120b): GQA attention with q/k/v/o biases and one learned
// sink logit per head, layers alternating between a sliding window (`layer_types`, 128 positions)
// and full attention, YaRN rope; in every layer a router with a bias over num_local_experts experts
// (a softmax over the top num_experts_per_tok logits), experts with biases whose gate and up rows the
// checkpoint interleaves (put back as gate rows then up rows at preparation) and the clamped SwiGLU
// (swiglu_limit). The experts are MXFP4 in the checkpoint (quant_method "mxfp4") and stay MXFP4.
//   checkpoint, under model.layers.N.: self_attn.{q,k,v,o}_proj.{weight,bias}, self_attn.sinks [H],
//   mlp.router.{weight [E, hidden], bias [E]}, mlp.experts.gate_up_proj_{blocks [E, 2I, hidden/32, 16],
//   scales [E, 2I, hidden/32], bias [E, 2I]}, mlp.experts.down_proj_{blocks, scales, bias} (hidden rows).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/architectures/config_context.h"
#include "model/architectures/moe_decoder.h"
#include "model/blocks.h"

namespace flare::model {
namespace {

void configure(const ConfigContext& config, ModelSpec& spec) {
  if (spec.activation != Activation::silu) config.reject("hidden_act", "gpt-oss's experts are a clamped SwiGLU (silu)");
  if (!spec.quantization.mxfp4) {
    config.reject("quantization_config", "gpt-oss checkpoints with MXFP4 experts (quant_method \"mxfp4\") are read; "
                                         "BF16 experts are not supported");
  }
  const bool attention_bias = config.get_bool("attention_bias", true);
  if (!attention_bias) config.reject("attention_bias", "gpt-oss attention has biases");
  spec.qkv_bias = true;
  spec.o_bias = true;
  require_full_attention_layers(config, "sliding_attention");
  const std::int32_t window = config.get_positive_int("sliding_window", 128);
  const bool has_types = config.has("layer_types");
  if (has_types && config.json.at("layer_types").size() != std::size_t(spec.n_layers)) {
    config.reject("layer_types", fmt::format("must name {} layers", spec.n_layers));
  }
  for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
    // Without layer_types, the reference's pattern: even layers slide.
    const bool sliding = has_types ? config.json.at("layer_types").at(std::size_t(layer)) == "sliding_attention"
                                   : layer % 2 == 0;
    spec.layers[std::size_t(layer)].sliding_window = sliding ? window : 0;
    spec.layers[std::size_t(layer)].experts = true;
  }
  spec.moe.n_experts = config.get_positive_int("num_local_experts");
  spec.moe.top_k = config.get_positive_int(config.has("num_experts_per_tok") ? "num_experts_per_tok" : "experts_per_token");
  spec.moe.expert_intermediate_size = spec.intermediate_size;
  spec.moe.renormalize = true;
  spec.moe.swiglu_limit = float(config.get_number("swiglu_limit", 7.0));
  if (!(spec.moe.swiglu_limit > 0)) config.reject("swiglu_limit", "must be positive");
  moe_check(config, spec, "num_local_experts", "num_experts_per_tok");
  if (spec.hidden_size % 32 != 0 || spec.intermediate_size % 32 != 0) {
    config.reject("hidden_size", "MXFP4 experts need hidden_size and intermediate_size to be multiples of 32");
  }
}

WeightEntry stack_vector(std::string name, std::string source, std::int64_t n, std::int32_t n_batch,
                         WeightTransform transform) {
  WeightEntry e{std::move(name), WeightKind::vector, {{std::move(source), n}}, 0, "bias", transform};
  e.n_batch = n_batch;
  return e;
}

WeightTable weight_table(const ModelSpec& spec) {
  const std::int64_t h = spec.hidden_size, inter = spec.moe.expert_intermediate_size, e = spec.moe.n_experts;
  WeightTable table;
  table.groups.push_back(embedding_group(spec, table, WeightTransform::none));
  for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
    const std::string p = fmt::format("model.layers.{}.", layer), t = fmt::format("layers.{}.", layer);
    WeightGroup g{fmt::format("weights/layer-{:03}", layer), {}};
    g.entries.push_back(vector_entry(t + "input_norm", p + "input_layernorm.weight", h, "norm"));
    attention_entries(spec, p, t, g.entries);
    g.entries.push_back(vector_entry(t + "sinks", p + "self_attn.sinks", spec.n_heads, "sinks"));
    g.entries.push_back(vector_entry(t + "post_norm", p + "post_attention_layernorm.weight", h, "norm"));
    g.entries.push_back({t + "router", WeightKind::projection, {{p + "mlp.router.weight", e}}, h, "router"});
    g.entries.push_back(vector_entry(t + "router_bias", p + "mlp.router.bias", e, "bias"));
    WeightEntry gate_up{t + "experts.gate_up", WeightKind::projection, {{p + "mlp.experts.gate_up_proj", e * 2 * inter}},
                        h, "experts.gate_up", WeightTransform::deinterleave_rows, TensorSplit::rows,
                        std::int32_t(e)};
    gate_up.mxfp4 = true;
    g.entries.push_back(gate_up);
    g.entries.push_back(stack_vector(t + "experts.gate_up_bias", p + "mlp.experts.gate_up_proj_bias", e * 2 * inter,
                                     std::int32_t(e), WeightTransform::deinterleave_rows));
    WeightEntry down{t + "experts.down", WeightKind::projection, {{p + "mlp.experts.down_proj", e * h}}, inter,
                     "experts.down", WeightTransform::none, TensorSplit::cols, std::int32_t(e)};
    down.mxfp4 = true;
    g.entries.push_back(down);
    g.entries.push_back(stack_vector(t + "experts.down_bias", p + "mlp.experts.down_proj_bias", e * h, std::int32_t(e),
                                     WeightTransform::none));
    table.groups.push_back(std::move(g));
  }
  return table;
}

}  // namespace

extern const Architecture k_gpt_oss{"GptOssForCausalLM", configure, weight_table, moe_history, moe_plan_arena,
                                    moe_program, moe_kernel_needs};

}  // namespace flare::model
