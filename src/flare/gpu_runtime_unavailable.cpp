// GPU packages in a build without the CUDA toolkit headers: refused with the reason.
#ifndef FLARE_HAVE_CUDA

#include "common/error.h"
#include "flare/gpu_runtime.h"

namespace flare::cli {

struct GpuRuntime::State {};

GpuRuntime::GpuRuntime(const package::Package& pkg, const std::optional<std::vector<int>>&, const helios::KernelNeeds&,
                       const std::filesystem::path&, const std::filesystem::path&) {
  fail(ExitCode::failure, "package {} was prepared for {}, and this build has no CUDA backend (built without the CUDA "
       "toolkit headers)", pkg.directory().string(), pkg.manifest().target());
}
GpuRuntime::~GpuRuntime() = default;
std::unique_ptr<helios::Backend> GpuRuntime::take_backend() { return nullptr; }
std::string GpuRuntime::device_label() const { return ""; }
std::size_t GpuRuntime::load_kernels() { return 0; }
std::int64_t GpuRuntime::n_compiled() const { return 0; }
std::int64_t GpuRuntime::n_tuned() const { return 0; }
std::size_t GpuRuntime::n_tuned_shapes() const { return 0; }
GpuDeviceMemory GpuRuntime::memory() const { return {}; }
GpuInfo GpuRuntime::gpu_info() const { return {}; }

}  // namespace flare::cli

#endif
