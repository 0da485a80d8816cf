// `ignition debug-serve [MODEL]` (spec cli-design 2 and "Development without package export"):
// prepares the model with the export flags and serves it from the same process, for diagnosing
// model and preparation faults, not for real serving or comparisons (use export + flare run).
// The prepared package goes to a private cache inside a locked staging tree of the model cache
// (never published), is trusted without a prompt (this process signed it) and is removed when
// serving ends. Listener
// flags --host and --port, and --history-drafts / --no-history-drafts, apply here only.
#pragma once

#include <optional>
#include <string>

#include "ignition/export.h"

namespace flare::ignition {

struct DebugServeOptions {
  ExportOptions prepare;
  std::optional<std::string> host;
  std::optional<int> port;
  std::optional<bool> history_drafts;
};

int run_debug_serve(const DebugServeOptions& options);
void add_debug_serve_command(CLI::App& app, DebugServeOptions& options);

}  // namespace flare::ignition
