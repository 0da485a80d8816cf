// The `flare` command line: serving, inspection and model-cache management. Each command lives in
// its own file in this folder and registers itself here; this file only assembles the table.
#include "flare/commands.h"

#include "common/cli.h"
#include "flare/download_command.h"
#include "flare/package_commands.h"
#include "flare/run_command.h"

namespace flare::cli {

int main(int argc, char** argv) {
  auto app = make_app("flare", "Flare: serve, inspect and manage prepared model packages.");
  PackageCommandGlobals package_globals;
  app->add_option("--model-cache", package_globals.model_cache, "Model cache directory");
  app->add_option("--config", package_globals.config, "Configuration file");
  app->add_flag("--plain", package_globals.plain, "Disable terminal styling");
  RunOptions run_options;
  add_run_command(*app, package_globals, run_options);
  add_package_commands(*app, package_globals);
  add_download_commands(*app, package_globals);
  return run_cli(*app, argc, argv);
}

}  // namespace flare::cli
