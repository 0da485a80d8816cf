// The architecture registry: one entry per Hugging Face `architectures` name, each defined in its
// own file under architectures/. An architecture is everything that differs between model families:
//   - configure: its own config.json fields into the spec, rejecting what it does not implement;
//   - weight_table: its prepared tensors, declared once (weight_table.h);
//   - history: what each layer keeps of the past (helios/history.h);
//   - plan_arena: its activation buffers, sized per token / logits row / row;
//   - program: its forward pass over loaded weights, run by the step executor;
//   - kernel_needs: what that program launches beyond every backend's fixed kernels (the kernel
//     catalog's model part, helios/serving_catalog.h).
// Nothing outside architectures/ switches on the architecture.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "helios/activation_arena.h"
#include "helios/backend.h"
#include "helios/history.h"
#include "helios/serving_catalog.h"
#include "helios/step_program.h"
#include "model/spec.h"
#include "model/weight_table.h"

namespace flare::model {

struct ConfigContext;  // architectures/config_context.h

struct Architecture {
  std::string_view name;
  void (*configure)(const ConfigContext& config, ModelSpec& spec);
  WeightTable (*weight_table)(const ModelSpec& spec);
  std::vector<helios::HistorySpec> (*history)(const ModelSpec& spec);
  // Adds the program's activation buffers to `plan` and returns nothing: the program calls it
  // for its slots, the export's memory plan for their bytes.
  void (*plan_arena)(const ModelSpec& spec, helios::DType activations, helios::ArenaPlan& plan);
  // The forward program over `weights` (which must outlive it) on `backend`.
  std::unique_ptr<helios::StepProgram> (*program)(const ModelSpec& spec, helios::Backend& backend,
                                                  const LoadedWeights& weights);
  // Adds the program's attention shapes and whether it has FP8 projections to `needs`.
  void (*kernel_needs)(const ModelSpec& spec, helios::KernelNeeds& needs);
};

const Architecture* architecture_find(std::string_view name);
// The spec's architecture (parsing only produces specs of known ones).
const Architecture& architecture_of(const ModelSpec& spec);
std::string architecture_list();  // "LlamaForCausalLM, ..." for messages

// Bytes of the arena `spec`'s program computes in at these capacities (the export's memory plan).
std::uint64_t arena_bytes(const ModelSpec& spec, helios::DType activations, const helios::ArenaCapacity& capacity);

}  // namespace flare::model
