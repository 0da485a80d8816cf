// Random fills of device memory through the fill_random kernel (src/helios/kernels/fill_random.cu),
// enqueued on the backend's stream: model-sized weights and KV pages never pass through the host.
// Values depend only on (seed, element index).
#pragma once

#include <cstdint>
#include <memory>

#include "helios/backend.h"
#include "helios/cuda/cuda_backend.h"

namespace flare::bench::cuda {

class DeviceFill {
 public:
  // Compiles (or loads from the kernel cache) the fill kernels for the backend's device.
  explicit DeviceFill(helios::cuda::CudaBackend& backend);
  ~DeviceFill();

  // Each element: offset + scale * u, u uniform in [-1, 1). `data` is a device address.
  void bf16(void* data, std::uint64_t n_elements, std::uint64_t seed, float scale, float offset = 0.0f);
  void f32(void* data, std::uint64_t n_elements, std::uint64_t seed, float scale, float offset = 0.0f);
  // Finite e4m3 bytes of magnitude 2^-6 .. 3.75.
  void f8_e4m3(void* data, std::uint64_t n_bytes, std::uint64_t seed);
  // A tensor by its dtype (bf16, f32 or f8_e4m3), padding included.
  void tensor(const helios::Tensor& t, std::uint64_t seed, float scale, float offset = 0.0f);

 private:
  void launch(CUfunction f, std::uint64_t n, std::vector<void*> args, const char* name);
  helios::cuda::CudaBackend& backend_;
  std::unique_ptr<helios::cuda::Module> module_;
  CUfunction bf16_ = nullptr, f32_ = nullptr, f8_ = nullptr;
};

}  // namespace flare::bench::cuda
