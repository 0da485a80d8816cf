// The declared recipes. Revisions are the Hugging Face commits the recipes were qualified
// against; sampling defaults are the values each model card (or its generation_config.json)
// recommends.
#include "model/recipes/recipe.h"

#include <algorithm>
#include <cctype>

#include "common/error.h"
#include "common/suggest.h"

namespace flare::model {
namespace {

std::vector<Recipe> declare_recipes() {
  std::vector<Recipe> recipes;

  // The built-in demo: flare-demo-coder, a small trained Qwen3-architecture Python code model kept
  // in the project tree (assets/demo-model), so the README's demo runs offline on any machine.
  Recipe demo;
  demo.name = "demo";
  demo.canonical_name = "flare-demo-coder";
  demo.aliases = {"demo", "flare-demo-coder"};
  demo.checkpoint = {CheckpointSource::Kind::bundled, "", "local", "demo-model"};
  demo.architectures = {"Qwen3ForCausalLM"};
  demo.license = "apache-2.0";
  demo.license_url = "https://www.apache.org/licenses/LICENSE-2.0";
  demo.default_max_concurrency = 8;
  demo.max_concurrency_limit = 64;
  demo.prefill_chunk_tokens = 512;
  demo.page_size_tokens = 16;
  demo.sampling = {0.8f, 0.95f, 0, 0.0f, 1.1f};
  demo.bundled_draft_directory = "demo-model/draft";  // flare-demo-coder-draft, trained beside it
  recipes.push_back(demo);

  Recipe llama;
  llama.name = "llama-3.1-8b-instruct";
  llama.canonical_name = "Llama-3.1-8B-Instruct";
  llama.aliases = {"llama-3.1-8b-instruct", "llama-3.1-8b"};
  llama.checkpoint = {CheckpointSource::Kind::hub, "meta-llama/Llama-3.1-8B-Instruct",
                      "0e9e39f249a16976918f6564b8830bc894c89659", ""};
  llama.architectures = {"LlamaForCausalLM"};
  llama.license = "llama3.1";
  llama.license_url = "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/LICENSE";
  llama.tensor_parallel_sizes = {1, 2, 4, 8};
  llama.sampling = {0.6f, 0.9f, 0, 0.0f, 1.0f};  // generation_config.json
  recipes.push_back(llama);

  Recipe qwen3;
  qwen3.name = "qwen3-8b";
  qwen3.canonical_name = "Qwen3-8B";
  qwen3.aliases = {"qwen3-8b"};
  qwen3.checkpoint = {CheckpointSource::Kind::hub, "Qwen/Qwen3-8B", "b968826d9c46dd6066d109eabc6255188de91218", ""};
  qwen3.architectures = {"Qwen3ForCausalLM"};
  qwen3.license = "apache-2.0";
  qwen3.license_url = "https://huggingface.co/Qwen/Qwen3-8B/blob/main/LICENSE";
  qwen3.tensor_parallel_sizes = {1, 2, 4, 8};
  qwen3.sampling = {0.6f, 0.95f, 20, 0.0f, 1.0f};  // model card, thinking mode
  recipes.push_back(qwen3);

  Recipe qwen2;
  qwen2.name = "qwen2.5-7b-instruct";
  qwen2.canonical_name = "Qwen2.5-7B-Instruct";
  qwen2.aliases = {"qwen2.5-7b-instruct", "qwen2.5-7b"};
  qwen2.checkpoint = {CheckpointSource::Kind::hub, "Qwen/Qwen2.5-7B-Instruct",
                      "a09a35458c702b33eeacc393d103063234e8bc28", ""};
  qwen2.architectures = {"Qwen2ForCausalLM"};
  qwen2.license = "apache-2.0";
  qwen2.license_url = "https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/LICENSE";
  qwen2.tensor_parallel_sizes = {1, 2, 4};
  qwen2.sampling = {0.7f, 0.8f, 20, 0.0f, 1.05f};  // generation_config.json
  recipes.push_back(qwen2);

  Recipe mistral;
  mistral.name = "mistral-7b-instruct-v0.3";
  mistral.canonical_name = "Mistral-7B-Instruct-v0.3";
  mistral.aliases = {"mistral-7b-instruct-v0.3", "mistral-7b"};
  mistral.checkpoint = {CheckpointSource::Kind::hub, "mistralai/Mistral-7B-Instruct-v0.3",
                        "c170c708c41dac9275d15a8fff4eca08d52bab71", ""};
  mistral.architectures = {"MistralForCausalLM"};
  mistral.license = "apache-2.0";
  mistral.license_url = "https://www.apache.org/licenses/LICENSE-2.0";
  mistral.tensor_parallel_sizes = {1, 2, 4, 8};
  // Its generation_config.json declares no sampling values: transformers' neutral defaults.
  mistral.sampling = {1.0f, 1.0f, 0, 0.0f, 1.0f};
  recipes.push_back(mistral);

  // Gemma 3 text (the 1B instruction model is the text-only Gemma3ForCausalLM checkpoint). Its
  // revision is not pinned yet: no checkpoint is qualified until a run against the real weights.
  Recipe gemma3;
  gemma3.name = "gemma-3-1b-it";
  gemma3.canonical_name = "gemma-3-1b-it";
  gemma3.aliases = {"gemma-3-1b-it", "gemma-3-1b"};
  gemma3.checkpoint = {CheckpointSource::Kind::hub, "google/gemma-3-1b-it", "", ""};
  gemma3.architectures = {"Gemma3ForCausalLM"};
  gemma3.license = "gemma";
  gemma3.license_url = "https://ai.google.dev/gemma/terms";
  gemma3.tensor_parallel_sizes = {1, 2};
  gemma3.context_ceiling = 32768;
  gemma3.sampling = {1.0f, 0.95f, 64, 0.0f, 1.0f};  // model card: temperature 1, top_k 64, top_p 0.95
  recipes.push_back(gemma3);

  // Mixture of experts. Revisions are not pinned yet: the Hub's commit hashes for these could not
  // be read here, and the recipe resolves the branch head until they are.
  Recipe qwen3_moe;
  qwen3_moe.name = "qwen3-30b-a3b";
  qwen3_moe.canonical_name = "Qwen3-30B-A3B";
  qwen3_moe.aliases = {"qwen3-30b-a3b"};
  qwen3_moe.checkpoint = {CheckpointSource::Kind::hub, "Qwen/Qwen3-30B-A3B", "", ""};
  qwen3_moe.architectures = {"Qwen3MoeForCausalLM"};
  qwen3_moe.license = "apache-2.0";
  qwen3_moe.license_url = "https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/LICENSE";
  qwen3_moe.tensor_parallel_sizes = {1, 2, 4};
  qwen3_moe.sampling = {0.6f, 0.95f, 20, 0.0f, 1.0f};  // model card, thinking mode
  recipes.push_back(qwen3_moe);

  Recipe mixtral;
  mixtral.name = "mixtral-8x7b-instruct";
  mixtral.canonical_name = "Mixtral-8x7B-Instruct-v0.1";
  mixtral.aliases = {"mixtral-8x7b-instruct", "mixtral-8x7b"};
  mixtral.checkpoint = {CheckpointSource::Kind::hub, "mistralai/Mixtral-8x7B-Instruct-v0.1", "", ""};
  mixtral.architectures = {"MixtralForCausalLM"};
  mixtral.license = "apache-2.0";
  mixtral.license_url = "https://www.apache.org/licenses/LICENSE-2.0";
  mixtral.tensor_parallel_sizes = {1, 2, 4, 8};
  recipes.push_back(mixtral);

  // gpt-oss: CPU backend only so far (CUDA refuses attention sinks and MXFP4 experts). Its chats
  // are rendered by the native harmony encoder, not the checkpoint's template (server/harmony_chat.h).
  Recipe gpt_oss;
  gpt_oss.name = "gpt-oss-20b";
  gpt_oss.canonical_name = "gpt-oss-20b";
  gpt_oss.aliases = {"gpt-oss-20b"};
  gpt_oss.checkpoint = {CheckpointSource::Kind::hub, "openai/gpt-oss-20b", "", ""};
  gpt_oss.architectures = {"GptOssForCausalLM"};
  gpt_oss.license = "apache-2.0";
  gpt_oss.license_url = "https://huggingface.co/openai/gpt-oss-20b/blob/main/LICENSE";
  gpt_oss.tensor_parallel_sizes = {1};
  gpt_oss.sampling = {1.0f, 1.0f, 0, 0.0f, 1.0f};  // model card: temperature 1, top_p 1
  recipes.push_back(gpt_oss);
  return recipes;
}

}  // namespace

const std::vector<Recipe>& all_recipes() {
  static const std::vector<Recipe> recipes = declare_recipes();
  return recipes;
}

const Recipe* find_recipe_by_alias(const std::string& alias) {
  const std::string wanted = ascii_lower(alias);
  for (const auto& recipe : all_recipes()) {
    if (ascii_lower(recipe.name) == wanted || ascii_lower(recipe.canonical_name) == wanted) return &recipe;
    for (const auto& candidate : recipe.aliases)
      if (ascii_lower(candidate) == wanted) return &recipe;
  }
  return nullptr;
}

const Recipe* find_recipe_by_repository(const std::string& repository) {
  const std::string wanted = ascii_lower(repository);
  for (const auto& recipe : all_recipes())
    if (recipe.checkpoint.kind == CheckpointSource::Kind::hub && ascii_lower(recipe.checkpoint.repository) == wanted)
      return &recipe;
  return nullptr;
}

const Recipe* find_recipe_by_architecture(const std::string& architecture) {
  for (const auto& recipe : all_recipes()) {
    if (recipe.checkpoint.kind == CheckpointSource::Kind::bundled) continue;  // prefer general recipes
    for (const auto& candidate : recipe.architectures)
      if (candidate == architecture) return &recipe;
  }
  for (const auto& recipe : all_recipes())
    for (const auto& candidate : recipe.architectures)
      if (candidate == architecture) return &recipe;
  return nullptr;
}

std::vector<std::string> all_recipe_aliases() {
  std::vector<std::string> aliases;
  for (const auto& recipe : all_recipes())
    for (const auto& alias : recipe.aliases) aliases.push_back(alias);
  return aliases;
}

void fail_unknown_alias(const std::string& alias) {
  std::string message = fmt::format("unknown model '{}'", alias);
  if (auto close = suggest_close_match(alias, all_recipe_aliases())) message += fmt::format(" (did you mean '{}'?)", *close);
  message += fmt::format("\nSupported aliases: {}.\nA Hugging Face repository (org/name[@revision]) or a checkpoint "
                         "directory also works.",
                         fmt::join(all_recipe_aliases(), ", "));
  throw Error(ExitCode::usage, message);
}

}  // namespace flare::model
