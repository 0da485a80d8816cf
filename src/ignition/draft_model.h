// The learned draft model `ignition export` prepares into a package beside its target
// (speculative decoding): resolved from --draft-model (a checkpoint directory or a repository in
// the hub cache) or the recipe's bundled draft, checked against the target (same vocabulary and
// tokenizer), and prepared like any checkpoint, its tensors and payloads renamed under "draft/"
// so one manifest holds both layouts. The manifest's Speculation message records it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "common/config.h"
#include "ignition/checkpoint_download.h"
#include "model/prepared_weights.h"
#include "model/recipes/recipe.h"
#include "model/spec.h"
#include "proto/manifest.pb.h"

namespace flare::ignition {

inline constexpr const char* kDraftPrefix = "draft/";

struct SpeculationSettings {
  std::int32_t max_draft_tokens = 0;  // 0: --no-mtp
  bool adaptive_verification = true;
  std::int32_t token_capacity = 128;  // verify-row target tokens per step
};

struct PreparedDraft {
  std::filesystem::path checkpoint_dir;
  model::ModelSpec spec;
  std::string config_json;
  std::string architecture;
  std::string source;  // repository@revision, or the directory's name
  std::uint64_t weight_bytes = 0;
  std::uint64_t kv_bytes_per_token = 0;  // BF16 pages
};

// The draft to prepare: `selector` (--draft-model) or the recipe's bundled draft; none with
// --no-mtp (no_mtp) or when neither names one. A repository draft comes from the hub cache,
// downloaded through `hub` as the target's checkpoint is (obtain_hub_checkpoint). A draft that is
// not a checkpoint, or whose vocabulary or tokenizer differs from the target's, is flare::Error
// (usage / preparation; fetch and capacity errors from the download).
std::optional<PreparedDraft> resolve_draft(const std::optional<std::string>& selector, bool no_mtp,
                                           const model::Recipe& recipe, const Config& config,
                                           const std::filesystem::path& assets_dir,
                                           const std::filesystem::path& target_checkpoint,
                                           const model::ModelSpec& target_spec, const HubOptions& hub);

// Prepares the draft's weights as groups whose payload and tensor names start with kDraftPrefix.
void prepare_draft_weights(const PreparedDraft& draft, const std::function<void(model::PreparedGroup&&)>& sink);

// Writes manifest.speculation (and the deployment capacities' speculation fields).
void record_speculation(proto::Manifest& manifest, const SpeculationSettings& settings,
                        const std::optional<PreparedDraft>& draft);

}  // namespace flare::ignition
