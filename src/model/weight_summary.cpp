// Weight summaries (see weight_summary.h).
#include "model/weight_summary.h"

#include <algorithm>

#include "model/architecture.h"

namespace flare::model {

WeightSummary weight_summary(const ModelSpec& spec, const std::function<std::uint64_t(std::string_view)>& stored_bytes) {
  const WeightTable table = architecture_of(spec).weight_table(spec);
  WeightSummary s;
  s.n_parameters = table.n_parameters();
  s.n_active_parameters = table.n_active_parameters(spec.moe.top_k);
  s.n_experts = spec.moe.n_experts;
  s.experts_per_token = spec.moe.top_k;
  for (const WeightGroup& group : table.groups) {
    for (const WeightEntry& entry : group.entries) {
      const std::uint64_t bytes = stored_bytes(entry.name);
      s.stored_bytes += bytes;
      if (entry.n_batch > 1) {
        s.expert_bytes += bytes;
        s.decode_weight_bytes += bytes / std::uint64_t(entry.n_batch) * std::uint64_t(std::min(spec.moe.top_k, entry.n_batch));
      } else if (entry.name != "embed" || table.aliases.contains("lm_head")) {
        s.decode_weight_bytes += bytes;
      }
    }
  }
  return s;
}

}  // namespace flare::model
