// The step times `ignition export` measures on the GPU (GpuPreparation::time_steps) as the
// manifest records them (Speculation.measured_steps), and the line the "Capture graphs" stage
// prints about them.
#pragma once

#include <span>
#include <string>

#include "ignition/gpu_preparation.h"
#include "proto/manifest.pb.h"

namespace flare::ignition {

// Records `times` and the device's name in the manifest's speculation (nothing when empty).
void record_measured_steps(proto::Manifest& manifest, std::span<const MeasuredStepTime> times,
                           const std::string& device_name);

// "; the widest verify round of one row costs 1.22x a decode step" (empty without both timed).
std::string measured_steps_summary(std::span<const MeasuredStepTime> times);

}  // namespace flare::ignition
