// Speculative decoding at `flare run`: the package's prepared speculation (manifest.speculation)
// narrowed by the serving flags (--mtp-draft-tokens N, a load-time reduction; --history-drafts /
// --no-history-drafts; --mtp-adaptive-verification / --no-mtp-adaptive-verification), and the
// package's learned draft model loaded beside the target.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_options.h"
#include "helios/backend.h"
#include "model/model.h"
#include "model/prepared_weights.h"
#include "proto/manifest.pb.h"

namespace flare::cli {

struct SpeculationFlags {
  std::optional<int> mtp_draft_tokens;
  std::optional<bool> history_drafts;
  std::optional<bool> adaptive_verification;
};

struct RunSpeculation {
  std::int32_t max_draft_tokens = 0;  // 0: ordinary decoding (no draft source is on)
  bool history_drafts = false;
  bool learned_drafts = false;        // the package's draft model is loaded and drafts
  bool adaptive_verification = false;
  std::int32_t token_capacity = 0;
  std::int32_t graph_budget = 64;     // verify graphs captured (speculative_graph_budget)
  std::vector<engine::MeasuredStepCost> measured_steps;  // the package's, timed at export
  std::string summary;                // for the startup line: "up to 5 draft tokens (draft model, adaptive)"
};

// Flags beyond what the package prepared are flare::Error (usage) naming the export flag.
// graph_budget: the configuration's speculative_graph_budget (default 64).
RunSpeculation run_speculation(const proto::Manifest& manifest, const SpeculationFlags& flags,
                               std::optional<std::int64_t> graph_budget = std::nullopt);

// Copies the settings into the engine's options.
void apply_speculation(const RunSpeculation& speculation, engine::EngineOptions& options);

// The package's learned draft model on `backend` (its tensors under "draft/" in `whole`).
std::unique_ptr<model::Model> load_draft_model(const proto::Manifest& manifest, const model::PreparedLookup& whole,
                                               helios::Backend& backend);

}  // namespace flare::cli
