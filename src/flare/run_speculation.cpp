// Speculation settings and the draft model at `flare run` (see run_speculation.h).
#include "flare/run_speculation.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/error.h"
#include "model/prepared_views.h"

namespace flare::cli {

RunSpeculation run_speculation(const proto::Manifest& manifest, const SpeculationFlags& flags,
                               std::optional<std::int64_t> graph_budget) {
  const proto::Speculation& prepared = manifest.speculation();
  const auto max_prepared = static_cast<std::int32_t>(prepared.max_draft_tokens());
  const bool has_draft = !prepared.draft_model_config_json().empty();
  RunSpeculation out;
  out.max_draft_tokens = flags.mtp_draft_tokens.value_or(max_prepared);
  if (out.max_draft_tokens < 0 || out.max_draft_tokens > max_prepared) {
    fail_usage("--mtp-draft-tokens {}: the package verifies at most {} draft tokens{}", out.max_draft_tokens,
               max_prepared, max_prepared == 0 ? " (exported with --no-mtp)" : "; export again with a larger --mtp-draft-tokens");
  }
  out.history_drafts = flags.history_drafts.value_or(false);
  if (out.history_drafts && max_prepared == 0) {
    fail_usage("--history-drafts: the package was exported with --no-mtp (no verification rows); export it without "
               "--no-mtp");
  }
  out.learned_drafts = has_draft && out.max_draft_tokens > 0;
  out.adaptive_verification = flags.adaptive_verification.value_or(prepared.adaptive_verification());
  out.token_capacity = static_cast<std::int32_t>(prepared.token_capacity() ? prepared.token_capacity() : 128);
  if (graph_budget) out.graph_budget = static_cast<std::int32_t>(*graph_budget);  // config: 1 .. 2^20
  if (out.max_draft_tokens == 0 || (!out.learned_drafts && !out.history_drafts)) {
    out.summary = out.max_draft_tokens > 0 ? "off (--history-drafts enables history drafts)" : "off";
    out.max_draft_tokens = 0;
    out.history_drafts = false;
    return out;
  }
  for (const proto::MeasuredStep& step : prepared.measured_steps()) {
    if (step.rows() == 0 || step.tokens_per_row() == 0 || !(step.milliseconds() > 0.0)) continue;  // untrusted bytes
    out.measured_steps.push_back({static_cast<std::int32_t>(std::min<std::uint32_t>(step.rows(), 1u << 20)),
                                  static_cast<std::int32_t>(std::min<std::uint32_t>(step.tokens_per_row(), 64u)),
                                  step.milliseconds()});
  }
  std::string sources = out.learned_drafts && out.history_drafts ? "history, then the draft model"
                        : out.learned_drafts                   ? "draft model " + prepared.draft_source()
                                                               : "history drafts";
  const std::string policy = !out.adaptive_verification ? "fixed verification"
                             : out.measured_steps.empty() ? "adaptive verification"
                                                          : "adaptive verification from step costs measured at export on " +
                                                                prepared.steps_measured_on();
  out.summary = fmt::format("{} {} draft tokens ({}; {})", out.adaptive_verification ? "up to" : "exactly",
                            out.max_draft_tokens, sources, policy);
  return out;
}

void apply_speculation(const RunSpeculation& speculation, engine::EngineOptions& options) {
  options.max_draft_tokens = speculation.max_draft_tokens;
  options.history_drafts = speculation.history_drafts;
  options.learned_drafts = speculation.learned_drafts;
  options.adaptive_verification = speculation.adaptive_verification;
  options.speculative_token_capacity = speculation.token_capacity;
  options.speculative_graph_budget = speculation.graph_budget;
  options.measured_step_costs = speculation.measured_steps;
}

std::unique_ptr<model::Model> load_draft_model(const proto::Manifest& manifest, const model::PreparedLookup& whole,
                                               helios::Backend& backend) {
  const model::ModelSpec spec =
      model::model_spec_parse(manifest.speculation().draft_model_config_json(), "package draft model configuration");
  model::LoadedWeights weights = model::weights_from_prepared(spec, model::prefixed_lookup(whole, "draft/"), backend);
  return std::make_unique<model::Model>(spec, backend, std::move(weights));
}

}  // namespace flare::cli
