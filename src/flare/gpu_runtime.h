// Loading a GPU package (target sm_NN) for `flare run`: the GPU is chosen and checked against the
// package's architecture, the CUDA backend is built from the package's kernel images alone (NVRTC
// is never loaded, so nothing can compile) after checking they hold the whole kernel catalog of the
// run's settings on this GPU (helios/serving_catalog.h), with the package's GEMM tuning table
// frozen (nothing is timed), and device memory is reported for sizing the KV pool.
//
// Builds without the CUDA toolkit headers refuse GPU packages with a clear error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/gpu.h"
#include "helios/backend.h"
#include "helios/serving_catalog.h"
#include "package/package.h"

namespace flare::cli {

struct GpuDeviceMemory {
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
};

class GpuRuntime {
 public:
  // `gpus`: the --gpus list (visible indices), or empty for the first visible GPU; `needs`: what
  // the run serves (model::kernel_needs of its settings). Throws flare::Error: usage for a GPU
  // count or architecture that does not match the package, or kernel images lacking a module of
  // the catalog; failure when no GPU is usable or the package's executables or catalog are
  // malformed.
  GpuRuntime(const package::Package& pkg, const std::optional<std::vector<int>>& gpus,
             const helios::KernelNeeds& needs, const std::filesystem::path& kernel_cache_dir,
             const std::filesystem::path& cuda_root);
  ~GpuRuntime();

  // The backend, handed to the model runner once; the counters below stay readable while it lives.
  std::unique_ptr<helios::Backend> take_backend();
  std::string device_label() const;          // "GPU 0 (NVIDIA H200, sm_90)"
  std::size_t load_kernels();                // loads every catalog module; returns how many
  std::int64_t n_compiled() const;           // kernels compiled since load (always 0: no NVRTC)
  std::int64_t n_tuned() const;              // GEMM shapes timed since load (0: the table is frozen)
  std::size_t n_tuned_shapes() const;        // GEMM shapes in the packaged table (fused choices apart)
  GpuDeviceMemory memory() const;            // the device, now (from the thread that loaded it)
  GpuInfo gpu_info() const;                  // the chosen GPU as NVML described it at start

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace flare::cli
