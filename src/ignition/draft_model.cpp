// The learned draft model of an export: resolution, checks, preparation and its manifest record
// (see draft_model.h).
#include "ignition/draft_model.h"

#include <fstream>

#include "common/error.h"
#include "helios/history.h"
#include "hub/protocol.h"
#include "ignition/checkpoint_download.h"
#include "ignition/resolve.h"
#include "model/architecture.h"

namespace flare::ignition {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A directory, or ORG/NAME[@REVISION] from the hub cache, downloaded there like the target's
// checkpoint when the cache lacks it (same stage, errors and --offline).
fs::path locate(const std::string& selector, const Config& config, const HubOptions& hub, std::string& source) {
  std::error_code ec;
  if (fs::is_directory(selector, ec)) {
    source = fs::path(selector).lexically_normal().filename().string();
    if (source.empty()) source = fs::path(selector).lexically_normal().parent_path().filename().string();
    return fs::path(selector);
  }
  const auto at = selector.find('@');
  const std::string repository = selector.substr(0, at);
  const std::string revision = at == std::string::npos ? "main" : selector.substr(at + 1);
  if (!hub::is_repository_id(repository) || !hub::is_revision_name(revision)) {
    fail_usage("--draft-model {}: neither a checkpoint directory nor a Hugging Face repository (ORG/NAME[@REVISION])",
               selector);
  }
  std::string commit;
  const fs::path snapshot = obtain_hub_checkpoint(repository, revision, config, hub, &commit);
  source = repository + "@" + commit;
  return snapshot;
}

}  // namespace

std::optional<PreparedDraft> resolve_draft(const std::optional<std::string>& selector, bool no_mtp,
                                           const model::Recipe& recipe, const Config& config,
                                           const fs::path& assets_dir, const fs::path& target_checkpoint,
                                           const model::ModelSpec& target_spec, const HubOptions& hub) {
  if (no_mtp) {
    if (selector) fail_usage("--draft-model and --no-mtp cannot be combined");
    return std::nullopt;
  }
  PreparedDraft draft;
  if (selector) {
    draft.checkpoint_dir = locate(*selector, config, hub, draft.source);
  } else if (!recipe.bundled_draft_directory.empty()) {
    draft.checkpoint_dir = assets_dir / recipe.bundled_draft_directory;
    draft.source = recipe.bundled_draft_directory;
  } else {
    return std::nullopt;
  }
  const fs::path& dir = draft.checkpoint_dir;
  std::error_code ec;
  if (!fs::is_regular_file(dir / "config.json", ec)) {
    fail(ExitCode::preparation, "draft model {}: no config.json in {}", draft.source, dir.string());
  }
  draft.spec = model::model_spec_load(dir);
  draft.config_json = read_text(dir / "config.json");
  draft.architecture = read_architecture(dir);
  if (draft.spec.vocab_size != target_spec.vocab_size) {
    fail(ExitCode::preparation, "draft model {} has a vocabulary of {} tokens, the target {}: a draft must share "
         "the target's tokenizer", draft.source, draft.spec.vocab_size, target_spec.vocab_size);
  }
  if (fs::is_regular_file(dir / "tokenizer.json", ec) && fs::is_regular_file(target_checkpoint / "tokenizer.json", ec) &&
      read_text(dir / "tokenizer.json") != read_text(target_checkpoint / "tokenizer.json")) {
    fail(ExitCode::preparation, "draft model {} has another tokenizer.json than the target: a draft must share the "
         "target's tokenizer", draft.source);
  }
  const model::Architecture& architecture = model::architecture_of(draft.spec);
  draft.weight_bytes = architecture.weight_table(draft.spec).prepared_bytes();
  draft.kv_bytes_per_token = helios::history_bytes_per_token(architecture.history(draft.spec), helios::DType::bf16);
  return draft;
}

void prepare_draft_weights(const PreparedDraft& draft, const std::function<void(model::PreparedGroup&&)>& sink) {
  model::prepare_weights(draft.spec, draft.checkpoint_dir, [&](model::PreparedGroup&& group) {
    group.payload_name = kDraftPrefix + group.payload_name;
    for (auto& tensor : group.tensors) tensor.name = kDraftPrefix + tensor.name;
    sink(std::move(group));
  });
}

void record_speculation(proto::Manifest& manifest, const SpeculationSettings& settings,
                        const std::optional<PreparedDraft>& draft) {
  proto::Speculation* s = manifest.mutable_speculation();
  s->set_max_draft_tokens(static_cast<std::uint32_t>(settings.max_draft_tokens));
  s->set_adaptive_verification(settings.adaptive_verification);
  s->set_token_capacity(static_cast<std::uint32_t>(settings.token_capacity));
  if (draft) {
    s->set_draft_model_config_json(draft->config_json);
    s->set_draft_architecture(draft->architecture);
    s->set_draft_source(draft->source);
    s->set_draft_weight_bytes(draft->weight_bytes);
    s->set_draft_bytes_per_cached_token(draft->kv_bytes_per_token);
  }
  for (auto& deployment : *manifest.mutable_deployments()) {
    proto::Capacities* c = deployment.mutable_capacities();
    c->set_speculative_draft_tokens(static_cast<std::uint32_t>(settings.max_draft_tokens));
    c->set_speculative_method(settings.max_draft_tokens == 0 ? "" : draft ? "draft-model" : "history");
  }
}

}  // namespace flare::ignition
