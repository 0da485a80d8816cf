// A model's weights in the prepared layout its architecture's weight table declares (BF16 matrices,
// F32 norms and biases) filled with random values on the device: matrices uniform in +-0.02 (about
// a trained model's scale), norm weights 1 +- 0.05, biases +-0.02. Nothing is built on the host.
// With `matrices` f8_e4m3 the projection matrices are E4M3 bytes (magnitudes 2^-6 .. 3.75) with
// f32 scales per 128 x 128 block around 0.005 (so again about +-0.02), where the backend keeps
// that layout as FP8 (else BF16); embedding and output head stay BF16.
#pragma once

#include <cstdint>

#include "bench/cuda/device_fill.h"
#include "model/model.h"

namespace flare::bench::cuda {

model::LoadedWeights random_weights(const model::ModelSpec& spec, helios::Backend& backend, DeviceFill& fill,
                                    std::uint64_t seed, helios::DType matrices = helios::DType::bf16);

}  // namespace flare::bench::cuda
