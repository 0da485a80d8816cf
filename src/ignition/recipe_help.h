// Help text from recipe declarations (spec cli-design 2: "ignition --help and preparation-command
// help list every declared model alias, supported tensor-parallel size, and default/maximum draft
// count"; an alias or declared repository before --help shows that recipe's defaults and limits).
// Reads declarations only: no checkpoint, GPU or network is touched.
#pragma once

#include <string>

namespace flare::ignition {

// One line per recipe: aliases, checkpoint, tensor-parallel sizes, drafts (default / maximum).
std::string recipes_help();

// The defaults and limits of the recipe `selector` names (an alias or declared repository), or ""
// when it names none (a checkpoint directory, an unknown name).
std::string recipe_help(const std::string& selector);

}  // namespace flare::ignition
