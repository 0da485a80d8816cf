// The `ignition` command line: preparation of checkpoints into signed packages. Each command
// lives in its own file in this folder and registers itself here.
#include "ignition/commands.h"

#include "common/cli.h"
#include "ignition/bench_command.h"
#include "ignition/convert_command.h"
#include "ignition/debug_serve.h"
#include "ignition/export.h"
#include "ignition/recipe_help.h"
#include "ignition/signing_commands.h"

namespace flare::ignition {

int main(int argc, char** argv) {
  auto app = make_app("ignition", "Ignition: prepare Hugging Face checkpoints into signed Flare packages.");
  ExportOptions export_options;
  add_export_command(*app, export_options);
  DebugServeOptions debug_serve_options;
  add_debug_serve_command(*app, debug_serve_options);
  add_convert_command(*app);
  add_bench_command(*app);
  add_signing_commands(*app);
  app->footer(recipes_help());
  // `ignition export MODEL --help` shows MODEL's recipe: help is answered from the raw arguments
  // before they are parsed, so the word after the command is taken here.
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string command = argv[i], next = argv[i + 1];
    if ((command != "export" && command != "debug-serve") || next.empty() || next[0] == '-') continue;
    export_options.model = next;
    debug_serve_options.prepare.model = next;
    break;
  }
  return run_cli(*app, argc, argv);
}

}  // namespace flare::ignition
