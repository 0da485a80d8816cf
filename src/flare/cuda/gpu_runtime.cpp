// GPU package loading (see gpu_runtime.h) on the CUDA backend.
#include "flare/gpu_runtime.h"

#include "common/error.h"
#include "common/gpu.h"
#include "flare/package_catalog.h"
#include "helios/cuda/cuda_backend.h"
#include "helios/gemm_tuning.h"
#include "package/executables.h"

namespace flare::cli {

struct GpuRuntime::State {
  std::unique_ptr<helios::cuda::CudaBackend> owned;
  helios::cuda::CudaBackend* backend = nullptr;  // owned by the model runner after take_backend()
  GpuInfo gpu;
  std::size_t n_shapes = 0;
};

GpuRuntime::GpuRuntime(const package::Package& pkg, const std::optional<std::vector<int>>& gpus,
                       const helios::KernelNeeds& needs, const std::filesystem::path& kernel_cache_dir,
                       const std::filesystem::path& cuda_root)
    : state_(std::make_unique<State>()) {
  const proto::Manifest& manifest = pkg.manifest();
  const int n_ranks = manifest.deployments_size() > 0 ? manifest.deployments(0).ranks_size() : 0;
  if (gpus && static_cast<int>(gpus->size()) != n_ranks)
    fail_usage("--gpus names {} GPUs, but package {} was prepared for {} rank{}", gpus->size(),
               pkg.directory().string(), n_ranks, n_ranks == 1 ? "" : "s");
  if (n_ranks != 1) fail_usage("package {} has {} ranks; this build serves one GPU", pkg.directory().string(), n_ranks);
  const GpuInventory inventory = discover_gpus();
  const BackendSelection selection = select_backend(inventory, gpus, false);
  if (selection.cpu)
    fail(ExitCode::failure, "package {} was prepared for {} and needs a GPU: {}", pkg.directory().string(),
         manifest.target(), inventory.unavailable_reason.empty() ? "none is visible" : inventory.unavailable_reason);
  state_->gpu = selection.gpus.front();
  if (state_->gpu.arch() != manifest.target())
    fail_usage("package {} was prepared for {}, but GPU {} ({}) is {}; export the model again on this GPU",
               pkg.directory().string(), manifest.target(), state_->gpu.visible_index, state_->gpu.name,
               state_->gpu.arch());

  helios::cuda::PackageKernels kernels;
  kernels.images = package::read_executables(pkg);
  std::string tuning_table;
  if (auto it = kernels.images.find(package::kGemmTuningKey); it != kernels.images.end()) {
    tuning_table = std::move(it->second);
    kernels.images.erase(it);
  }
  if (kernels.images.empty())
    fail_input("package {} for {} carries no kernel images", pkg.directory().string(), manifest.target());
  kernels.needs = needs;
  kernels.origin = fmt::format("package {}", pkg.directory().string());
  kernels.recorded = package_kernel_catalog(pkg);
  // The backend checks the images against the catalog of `needs` on this GPU before it loads any.
  state_->owned = std::make_unique<helios::cuda::CudaBackend>(state_->gpu.visible_index, kernel_cache_dir,
                                                              std::move(kernels), cuda_root);
  state_->backend = state_->owned.get();
  helios::GemmTuning tuning = tuning_table.empty() ? helios::GemmTuning() : helios::GemmTuning::parse(tuning_table);
  tuning.set_frozen(true);
  state_->n_shapes = tuning.size() - tuning.n_fused();
  state_->backend->install_gemm_tuning(std::move(tuning));
}

GpuRuntime::~GpuRuntime() = default;

std::unique_ptr<helios::Backend> GpuRuntime::take_backend() { return std::move(state_->owned); }

std::string GpuRuntime::device_label() const {
  return fmt::format("GPU {} ({}, {})", state_->gpu.visible_index, state_->gpu.name, state_->gpu.arch());
}

std::size_t GpuRuntime::load_kernels() { return state_->backend->load_prebuilt_modules(); }
std::int64_t GpuRuntime::n_compiled() const { return state_->backend->n_compiled(); }
std::int64_t GpuRuntime::n_tuned() const { return state_->backend->gemm_tuning().n_timed(); }
std::size_t GpuRuntime::n_tuned_shapes() const { return state_->n_shapes; }

GpuInfo GpuRuntime::gpu_info() const { return state_->gpu; }

GpuDeviceMemory GpuRuntime::memory() const {
  std::size_t free_bytes = 0, total_bytes = 0;
  helios::cuda::check(helios::cuda::driver().mem_get_info(&free_bytes, &total_bytes), "cuMemGetInfo");
  return {free_bytes, total_bytes};
}

}  // namespace flare::cli
