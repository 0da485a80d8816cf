// flare: serves, inspects and manages prepared packages. Argument parsing only; the
// commands live in src/flare/.
#include "flare/commands.h"

int main(int argc, char** argv) { return flare::cli::main(argc, argv); }
