// A package's recorded serving catalog (see package_catalog.h).
#include "flare/package_catalog.h"

#include <fmt/format.h>

namespace flare::cli {

std::optional<helios::ServingCatalog> package_kernel_catalog(const package::Package& pkg) {
  const std::string& text = pkg.manifest().kernel_catalog();
  if (text.empty()) return std::nullopt;
  return helios::serving_catalog_parse(text, fmt::format("package {}: kernel catalog", pkg.directory().string()));
}

}  // namespace flare::cli
