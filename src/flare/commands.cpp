#include "flare/commands.h"
#include <cstdio>
namespace flare::cli {
int main(int, char**) { std::puts("flare: under construction"); return 0; }
}
