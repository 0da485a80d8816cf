// What `flare inspect` shows (spec cli-design section 5.3), apart from how the package was found
// and verified: the selection (deployment, rank, detail sections) and the two renderers, boxed
// text and JSON. Internal to src/flare.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/terminal.h"
#include "model/weight_summary.h"
#include "package/package.h"

namespace flare::cli {

struct InspectView {
  bool verified = false;
  std::string verification;             // one line for the Model box
  std::optional<int> tensor_parallel;   // --tensor-parallel (validated)
  std::optional<int> rank;              // --rank (validated against the selected deployments)
  bool memory_map = false, graphs = false, frontend = false, all = false;
};

// Throws a usage error when --tensor-parallel or --rank do not select exactly what exists.
void validate_selection(const package::Package& package, const InspectView& view);

std::vector<const proto::Deployment*> selected_deployments(const package::Package& package, const InspectView& view);
bool rank_selected(const proto::Rank& rank, const InspectView& view);
// Shared payloads (tensor_parallel 0, rank -1) and those of the selected deployment and rank.
bool payload_selected(const proto::Payload& payload, const InspectView& view);

// Parameters and weight bytes from the package's config.json and tensor views (inspect_weights.cpp);
// nullopt when the package has no config this build reads.
std::optional<model::WeightSummary> package_weight_summary(const package::Package& package);
// "30.5B (3.3B active: 8 of 128 experts a token)", or "8.0B (8,030,261,248)" for a dense model.
std::string parameters_text(const model::WeightSummary& summary);

void print_inspect_text(const package::Package& package, const InspectView& view, const TerminalInfo& terminal);
std::string render_inspect_json(const package::Package& package, const InspectView& view);

}  // namespace flare::cli
