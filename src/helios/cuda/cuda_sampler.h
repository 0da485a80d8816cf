// Device sampling for CudaBackend::sample (cuda_sampler.cpp, kernel kernels/sample.cu): the host
// staging and device scratch it keeps between calls. Buffers grow when a larger batch, vocabulary
// or history arrives and are never shrunk, so a steady batch allocates nothing per step.
// Owned by the backend and used on its one engine thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "helios/cuda/cuda_backend_options.h"
#include "helios/cuda/driver.h"

namespace flare::helios::cuda {

struct SamplerScratch {
  std::vector<std::byte> host_in;              // per-row parameters, then histories and biases (int32)
  std::vector<std::byte> host_out;             // per-row results
  std::unique_ptr<DeviceMemory> device_in;     // host_in's copy
  std::unique_ptr<DeviceMemory> device_out;    // [n_rows] results
  std::unique_ptr<DeviceMemory> processed;     // [n_rows, vocab] f32 penalized logits
  std::unique_ptr<DeviceMemory> marks;         // [n_rows, vocab] int32, all zero between calls
};

// How the kernel splits a row: `ctas` CTAs (a thread block cluster when more than one), each with
// `slice` ids, in shared memory when `in_shared`.
struct SamplerLayout {
  int ctas = 1;
  std::int32_t slice = 0;
  bool in_shared = false;
};
SamplerLayout sampler_layout(const DeviceInfo& device, std::int32_t vocab, const CudaBackendOptions& options);
// The kernel's defines for a layout (its CTAs a row; the slice is an argument).
std::vector<std::pair<std::string, std::string>> sampler_defines(const SamplerLayout& layout);

// Grows `memory` to at least `size_bytes` (contents lost); true when it allocated.
bool sampler_reserve(std::unique_ptr<DeviceMemory>& memory, std::size_t size_bytes);

}  // namespace flare::helios::cuda
