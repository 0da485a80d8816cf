#include "ignition/weight_reuse.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "ignition/draft_model.h"
#include "package/package.h"

namespace flare::ignition {

ReusedWeights reuse_cached_weights(const package::ModelCache& cache, const std::string& model_key,
                                   const ResolvedModel& resolved, const std::string& config_json) {
  const auto selected = cache.selected_version(model_key);
  if (!selected)
    fail(ExitCode::preparation, "--reuse-weights: model '{}' has no cached default version in {}; export once "
         "without --reuse-weights", model_key, cache.root().string());
  package::EntryRef ref;
  ref.model_key = model_key;
  ref.version = *selected;
  const package::FileLock lease = cache.lease(ref);  // the entry cannot be removed while we read it
  const auto source = package::Package::open(cache.entry_path(ref));
  source->check_layout();
  const proto::Manifest& m = source->manifest();
  auto incompatible = [&](const std::string& what, const std::string& cached, const std::string& now) {
    fail(ExitCode::preparation, "--reuse-weights: {} has {} '{}', the export has '{}'; export without "
         "--reuse-weights", ref.text(), what, cached, now);
  };
  if (m.model().checkpoint_revision() != resolved.revision)
    incompatible("checkpoint revision", m.model().checkpoint_revision(), resolved.revision);
  if (m.model().architecture() != resolved.architecture)
    incompatible("architecture", m.model().architecture(), resolved.architecture);
  if (m.prepared_contract_version() != package::kPreparedContractVersion)
    incompatible("prepared-layout contract", std::to_string(m.prepared_contract_version()),
                 std::to_string(package::kPreparedContractVersion));
  if (m.deployments_size() != 1 || m.deployments(0).tensor_parallel() != 1)
    incompatible("tensor-parallel layout", std::to_string(m.deployments_size() ? m.deployments(0).tensor_parallel() : 0), "1");
  const auto cached_config = nlohmann::json::parse(m.model_config_json(), nullptr, false);
  const auto live_config = nlohmann::json::parse(config_json, nullptr, false);
  if (cached_config.is_discarded() || live_config.is_discarded() || cached_config != live_config)
    fail(ExitCode::preparation, "--reuse-weights: {} was prepared from a different config.json; export without "
         "--reuse-weights", ref.text());

  ReusedWeights reused;
  reused.source = ref.text();
  // The target's weights only: a learned draft is prepared again from its own checkpoint.
  auto is_draft = [](const std::string& name) { return name.rfind(kDraftPrefix, 0) == 0; };
  for (const auto& payload : m.payloads()) {
    if (payload.role() != proto::PAYLOAD_ROLE_WEIGHT || is_draft(payload.name())) continue;
    const auto bytes = source->payload_bytes(payload.id());
    reused.payloads.push_back({payload.name(), payload.id(), std::vector<std::byte>(bytes.begin(), bytes.end())});
  }
  if (reused.payloads.empty() || m.tensors_size() == 0)
    fail(ExitCode::preparation, "--reuse-weights: {} carries no prepared weights", ref.text());
  for (const auto& view : m.tensors()) {
    if (!is_draft(view.payload())) reused.views.push_back(view);
  }
  return reused;
}

}  // namespace flare::ignition
