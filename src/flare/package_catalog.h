// The serving catalog a package records (its manifest's kernel_catalog, helios/serving_catalog.h):
// `flare run` quotes it when the package lacks modules its own enumeration needs, and `flare
// inspect` shows its size. Reading it decodes no executable.
#pragma once

#include <optional>

#include "helios/serving_catalog.h"
#include "package/package.h"

namespace flare::cli {

// nullopt for a package without one (CPU targets, exports before catalogs were recorded). Throws
// flare::Error (input) naming the package when it is malformed.
std::optional<helios::ServingCatalog> package_kernel_catalog(const package::Package& pkg);

}  // namespace flare::cli
