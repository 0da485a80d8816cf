// Recipe help text (recipe_help.h).
#include "ignition/recipe_help.h"

#include <fmt/format.h>

#include "common/sizes.h"
#include "engine/engine_options.h"
#include "model/recipes/recipe.h"

namespace flare::ignition {
namespace {

std::string checkpoint_text(const model::Recipe& r) {
  if (r.checkpoint.kind == model::CheckpointSource::Kind::bundled)
    return fmt::format("bundled ({}, in the project's assets)", r.checkpoint.bundled_directory);
  if (r.checkpoint.revision.empty()) return r.checkpoint.repository + " (no pinned revision)";
  return fmt::format("{}@{}", r.checkpoint.repository, r.checkpoint.revision.substr(0, 12));
}

std::string drafts_text(const model::Recipe& r) {
  return fmt::format("{} default, {} maximum{}", r.default_draft_tokens, engine::k_max_draft_tokens,
                     r.bundled_draft_directory.empty() ? "" : ", learned draft " + r.bundled_draft_directory);
}

const model::Recipe* find(const std::string& selector) {
  if (const auto* r = model::find_recipe_by_alias(selector)) return r;
  const std::string repository = selector.substr(0, selector.find('@'));
  return model::find_recipe_by_repository(repository);
}

}  // namespace

std::string recipes_help() {
  std::string text = "Models (recipe aliases; `ignition export ALIAS --help` shows one recipe's defaults):\n";
  for (const auto& r : model::all_recipes()) {
    text += fmt::format("  {}\n      checkpoint {}; tensor parallel {}; drafts {}\n", fmt::join(r.aliases, ", "),
                        checkpoint_text(r), fmt::join(r.tensor_parallel_sizes, ", "), drafts_text(r));
  }
  return text;
}

std::string recipe_help(const std::string& selector) {
  const model::Recipe* r = find(selector);
  if (!r) return "";
  std::string text = fmt::format("Recipe {} ({}):\n", r->name, r->canonical_name);
  auto field = [&](const char* label, const std::string& value) { text += fmt::format("  {:<22}{}\n", label, value); };
  field("aliases", fmt::format("{}", fmt::join(r->aliases, ", ")));
  field("checkpoint", r->checkpoint.kind == model::CheckpointSource::Kind::bundled
                          ? checkpoint_text(*r)
                          : r->checkpoint.revision.empty()
                              ? checkpoint_text(*r)
                              : fmt::format("{} at {}", r->checkpoint.repository, r->checkpoint.revision));
  field("architectures", fmt::format("{}", fmt::join(r->architectures, ", ")));
  field("license", r->license);
  field("tensor parallel", fmt::format("{}", fmt::join(r->tensor_parallel_sizes, ", ")));
  field("max concurrency", fmt::format("{} default, 1 to {}", r->default_max_concurrency, r->max_concurrency_limit));
  field("prefill chunk", fmt::format("{} tokens", format_count(static_cast<std::uint64_t>(r->prefill_chunk_tokens))));
  field("KV page", fmt::format("{} tokens", r->page_size_tokens));
  if (r->context_ceiling) field("context ceiling", format_count(static_cast<std::uint64_t>(*r->context_ceiling)) + " tokens");
  field("draft tokens", drafts_text(*r));
  field("sampling defaults", fmt::format("temperature {}, top_p {}, top_k {}, min_p {}, repetition penalty {}",
                                         r->sampling.temperature, r->sampling.top_p, r->sampling.top_k,
                                         r->sampling.min_p, r->sampling.repetition_penalty));
  field("sampling ranges", fmt::format("temperature {} to {}, top_k {}", r->ranges.temperature_min,
                                       r->ranges.temperature_max,
                                       r->ranges.top_k_max == 0 ? std::string("any") : "up to " + std::to_string(r->ranges.top_k_max)));
  if (!r->export_repository.empty()) field("export repository", r->export_repository);
  return text;
}

}  // namespace flare::ignition
