// The table of supported architectures (see architecture.h); each entry is defined in its own file.
#include <array>
#include <string>

#include "common/error.h"
#include "model/architecture.h"

namespace flare::model {

extern const Architecture k_llama, k_qwen3, k_qwen2, k_mistral, k_gemma3, k_qwen3_moe, k_mixtral,
    k_gpt_oss;

namespace {

const std::array k_architectures = {&k_llama, &k_qwen3, &k_qwen2, &k_mistral, &k_gemma3, &k_qwen3_moe, &k_mixtral,
                                    &k_gpt_oss};

}  // namespace

const Architecture* architecture_find(std::string_view name) {
  for (const Architecture* architecture : k_architectures) {
    if (architecture->name == name) return architecture;
  }
  return nullptr;
}

const Architecture& architecture_of(const ModelSpec& spec) {
  const Architecture* architecture = architecture_find(spec.architecture);
  if (!architecture) fail(ExitCode::failure, "internal: architecture \"{}\" is not registered", spec.architecture);
  return *architecture;
}

std::string architecture_list() {
  std::string out;
  for (const Architecture* architecture : k_architectures) {
    if (!out.empty()) out += ", ";
    out += architecture->name;
  }
  return out;
}

std::uint64_t arena_bytes(const ModelSpec& spec, helios::DType activations, const helios::ArenaCapacity& capacity) {
  helios::ArenaPlan plan(spec.vocab_size);
  architecture_of(spec).plan_arena(spec, activations, plan);
  return plan.bytes(capacity);
}

std::int64_t ModelSpec::n_parameters() const { return architecture_of(*this).weight_table(*this).n_parameters(); }

std::int64_t ModelSpec::n_active_parameters() const {
  return architecture_of(*this).weight_table(*this).n_active_parameters(moe.top_k);
}

}  // namespace flare::model
