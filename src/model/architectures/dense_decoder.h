// The dense GQA decoder shared by Llama, Qwen2, Qwen3 and Mistral: each of those files configures
// its flags and builds its registry entry from these parts.
#pragma once

#include "model/architecture.h"

namespace flare::model {

WeightTable dense_weight_table(const ModelSpec& spec);
std::vector<helios::HistorySpec> dense_history(const ModelSpec& spec);
void dense_plan_arena(const ModelSpec& spec, helios::DType activations, helios::ArenaPlan& plan);
std::unique_ptr<helios::StepProgram> dense_program(const ModelSpec& spec, helios::Backend& backend,
                                                   const LoadedWeights& weights);
// What every dense family accepts: SwiGLU, full or model-wide sliding-window layers, one rope.
void dense_check(const ConfigContext& config, const ModelSpec& spec);

}  // namespace flare::model
