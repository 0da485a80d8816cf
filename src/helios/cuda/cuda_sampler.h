// Device sampling for CudaBackend::sample (cuda_sampler.cpp, kernel kernels/sample.cu): the host
// staging and device scratch it keeps between calls. Buffers grow when a larger batch, vocabulary
// or history arrives and are never shrunk, so a steady batch allocates nothing per step.
// Owned by the backend and used on its one engine thread.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "helios/cuda/driver.h"

namespace flare::helios::cuda {

struct SamplerScratch {
  std::vector<std::byte> host_in;              // per-row parameters, then histories and biases (int32)
  std::vector<std::byte> host_out;             // per-row results
  std::unique_ptr<DeviceMemory> device_in;     // host_in's copy
  std::unique_ptr<DeviceMemory> device_out;    // [n_rows] results
  std::unique_ptr<DeviceMemory> processed;     // [n_rows, vocab] f32 penalized logits
  std::unique_ptr<DeviceMemory> marks;         // [n_rows, vocab] int32, all zero between calls
  std::unique_ptr<DeviceMemory> lists;         // [n_rows, 2, vocab] (value, id) int32 pairs
};

// Grows `memory` to at least `size_bytes` (contents lost); true when it allocated.
bool sampler_reserve(std::unique_ptr<DeviceMemory>& memory, std::size_t size_bytes);

}  // namespace flare::helios::cuda
