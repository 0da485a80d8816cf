#include "ignition/commands.h"
#include <cstdio>
namespace flare::ignition {
int main(int, char**) { std::puts("ignition: under construction"); return 0; }
}
