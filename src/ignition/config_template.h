// The configuration file written on first export (spec cli-design section 3.3): when no file
// exists at the default path, export writes one whose every key is commented out and shows the
// value this export resolved, so a user sees what is in effect and can change it.
#pragma once

#include <cstdint>

#include "common/config.h"
#include "ignition/resolve.h"

namespace flare::ignition {

void write_config_template_if_absent(const Config& config, bool explicit_path, const ResolvedModel& model,
                                     std::int64_t max_concurrency);

}  // namespace flare::ignition
