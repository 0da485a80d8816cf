// The `flare` command line: serving, inspection and model-cache management. Each command lives in
// its own file in this folder and registers itself here; this file only assembles the table.
#include "flare/commands.h"

#include "common/cli.h"

namespace flare::cli {

int main(int argc, char** argv) {
  auto app = make_app("flare", "Flare: serve, inspect and manage prepared model packages.");
  return run_cli(*app, argc, argv);
}

}  // namespace flare::cli
