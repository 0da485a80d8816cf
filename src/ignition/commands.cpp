// The `ignition` command line: preparation of checkpoints into signed packages. Each command
// lives in its own file in this folder and registers itself here.
#include "ignition/commands.h"

#include "common/cli.h"

namespace flare::ignition {

int main(int argc, char** argv) {
  auto app = make_app("ignition", "Ignition: prepare Hugging Face checkpoints into signed Flare packages.");
  return run_cli(*app, argc, argv);
}

}  // namespace flare::ignition
