// ignition: prepares checkpoints into signed runtime packages. Argument parsing only;
// the commands live in src/ignition/.
#include "ignition/commands.h"

int main(int argc, char** argv) { return flare::ignition::main(argc, argv); }
