// A model's weights in the prepared layout (model.h: fused qkv and gate_up, BF16 matrices, F32
// norms and biases) filled with random values on the device: matrices uniform in +-0.02 (about a
// trained model's scale), norm weights 1 +- 0.05, biases +-0.02. Nothing is built on the host.
#pragma once

#include <cstdint>

#include "bench/cuda/device_fill.h"
#include "model/model.h"

namespace flare::bench::cuda {

model::Weights random_weights(const model::ModelSpec& spec, helios::Backend& backend, DeviceFill& fill,
                              std::uint64_t seed);

}  // namespace flare::bench::cuda
