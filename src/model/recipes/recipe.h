// Recipes (spec cli-design section 9): per-model knowledge as declarations, so the command line
// never needs to know which model it runs. A recipe declares its qualified checkpoint (an alias, a
// pinned Hugging Face source or a bundled local directory), the architectures it prepares,
// tensor-parallel sizes, concurrency range, prefill chunk, KV page geometry, and the sampling
// defaults and ranges verified against the model card. Model-specific checks live here too.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace flare::model {

struct SamplingDefaults {
  float temperature = 1.0f;
  float top_p = 1.0f;
  std::int32_t top_k = 0;  // 0: off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
};

// Inclusive ranges a request may choose within; a parameter without a range stays at its default.
struct SamplingRanges {
  float temperature_min = 0.0f, temperature_max = 2.0f;
  float top_p_min = 0.0f, top_p_max = 1.0f;  // top_p_min is exclusive-of-zero in practice
  std::int32_t top_k_max = 0;                 // 0: any
  float min_p_max = 1.0f;
  float repetition_penalty_min = 0.5f, repetition_penalty_max = 2.0f;
};

struct CheckpointSource {
  enum class Kind { hub, bundled };
  Kind kind = Kind::hub;
  std::string repository;  // "meta-llama/Llama-3.1-8B-Instruct" (hub)
  std::string revision;    // pinned commit (hub), "local" (bundled)
  std::string bundled_directory;  // relative to the project's assets directory (bundled)
};

struct Recipe {
  std::string name;                        // recipe id, "llama-3.1-8b-instruct"
  std::string canonical_name;              // served model id, "Llama-3.1-8B-Instruct"
  std::vector<std::string> aliases;        // selectors accepted on the command line
  CheckpointSource checkpoint;
  std::vector<std::string> architectures;  // config.json architectures this recipe prepares
  std::string license;                     // SPDX-like id from the model card
  std::string license_url;
  std::vector<int> tensor_parallel_sizes = {1};
  std::int32_t default_max_concurrency = 32;
  std::int32_t max_concurrency_limit = 256;
  std::int32_t prefill_chunk_tokens = 4096;
  std::int32_t page_size_tokens = 16;
  std::optional<std::int32_t> context_ceiling;  // cap below the checkpoint's maximum, if any
  SamplingDefaults sampling;
  SamplingRanges ranges;
  std::string export_repository;           // Hugging Face publishing target for exported packages
  // Speculative decoding: the learned draft prepared with it (a folder of the assets directory;
  // empty: none unless --draft-model names one) and the most drafts a verify row carries.
  std::string bundled_draft_directory;
  std::int32_t default_draft_tokens = 5;
};

// Every recipe, in display order (the demo first).
const std::vector<Recipe>& all_recipes();

// The recipe a selector names: an alias or recipe id (case-insensitive), or a declared repository.
const Recipe* find_recipe_by_alias(const std::string& alias);
const Recipe* find_recipe_by_repository(const std::string& repository);  // case-insensitive
// The recipe that prepares checkpoints of this config.json architecture (first declared).
const Recipe* find_recipe_by_architecture(const std::string& architecture);

// Every alias, for help text and "did you mean" suggestions.
std::vector<std::string> all_recipe_aliases();

// Usage error for an unknown alias: suggests a close match and lists the supported aliases.
[[noreturn]] void fail_unknown_alias(const std::string& alias);

}  // namespace flare::model
