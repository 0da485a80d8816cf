// The mixture-of-experts GQA decoder shared by Qwen3-MoE, Mixtral and gpt-oss: the dense decoder's attention,
// and in each layer the spec marks (LayerSpec::experts) a routed MLP of MoeSpec's experts in place
// of the dense one. Each family file configures the spec, names its checkpoint tensors and builds its
// registry entry from these parts.
#pragma once

#include <string_view>

#include "model/architecture.h"

namespace flare::model {

// Where a family's checkpoint keeps a layer's router and experts, under "model.layers.N.":
//   <block>gate.weight [n_experts, hidden]; <block>experts.E.<gate|up|down>.weight.
struct ExpertNames {
  std::string_view block;  // "mlp." (Qwen3-MoE), "block_sparse_moe." (Mixtral)
  std::string_view gate, up, down;
};

WeightTable moe_weight_table(const ModelSpec& spec, const ExpertNames& names);
std::vector<helios::HistorySpec> moe_history(const ModelSpec& spec);  // paged K/V, each layer's window
void moe_plan_arena(const ModelSpec& spec, helios::DType activations, helios::ArenaPlan& plan);
std::unique_ptr<helios::StepProgram> moe_program(const ModelSpec& spec, helios::Backend& backend,
                                                 const LoadedWeights& weights);
// Checks MoeSpec's sizes (config field names in `fields`: experts, top-k, expert size).
void moe_check(const ConfigContext& config, const ModelSpec& spec, std::string_view experts_field,
               std::string_view top_k_field);

}  // namespace flare::model
