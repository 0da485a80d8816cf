// The weight summary `flare inspect` shows (model/weight_summary.h), from the package's signed
// config.json and the byte lengths of its tensor views.
#include <map>

#include <fmt/format.h>

#include "common/error.h"
#include "common/sizes.h"
#include "flare/inspect_view.h"
#include "model/spec.h"

namespace flare::cli {

std::optional<model::WeightSummary> package_weight_summary(const package::Package& package) {
  const auto& m = package.manifest();
  if (m.model_config_json().empty()) return std::nullopt;
  std::map<std::string, std::uint64_t, std::less<>> view_bytes;
  for (const auto& view : m.tensors()) view_bytes[view.name()] += view.length_bytes();
  try {
    const model::ModelSpec spec = model::model_spec_parse(m.model_config_json(), "the package's config.json");
    return model::weight_summary(spec, [&](std::string_view name) {
      std::uint64_t bytes = 0;
      for (const std::string suffix : {"", ".scales", ".scale_block"}) {
        const auto it = view_bytes.find(std::string(name) + suffix);
        if (it != view_bytes.end()) bytes += it->second;
      }
      return bytes;
    });
  } catch (const Error&) {  // a config this build cannot read: the summary is left out, not the package
    return std::nullopt;
  }
}

std::string parameters_text(const model::WeightSummary& s) {
  const auto billions = [](std::int64_t n) {
    return n >= 1'000'000'000 ? fmt::format("{:.3g}B", double(n) / 1e9) : fmt::format("{:.3g}M", double(n) / 1e6);
  };
  if (s.n_experts == 0) return fmt::format("{} ({})", billions(s.n_parameters), format_count(std::uint64_t(s.n_parameters)));
  return fmt::format("{} ({} active: {} of {} experts a token)", billions(s.n_parameters), billions(s.n_active_parameters),
                     s.experts_per_token, s.n_experts);
}

}  // namespace flare::cli
