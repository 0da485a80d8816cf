// GPU preparation in a build without the CUDA toolkit headers: every entry point says so.
#ifndef FLARE_HAVE_CUDA

#include "common/error.h"
#include "ignition/gpu_preparation.h"

namespace flare::ignition {

struct GpuPreparation::State {};

GpuPreparation::GpuPreparation(const model::ModelSpec&, const GpuPreparationOptions&) {
  fail(ExitCode::preparation, "this build has no CUDA backend (built without the CUDA toolkit headers); export with --cpu");
}
GpuPreparation::~GpuPreparation() = default;
std::string GpuPreparation::arch() const { return ""; }
std::string GpuPreparation::device_name() const { return ""; }
std::string GpuPreparation::compiler() const { return ""; }
const helios::ServingCatalog& GpuPreparation::catalog() const {
  static const helios::ServingCatalog none;
  return none;
}
void GpuPreparation::compile_catalog() {}
void GpuPreparation::load_weights(const model::PreparedLookup&) {}
void GpuPreparation::tune_gemms() {}
void GpuPreparation::compile_forwards() {}
void GpuPreparation::capture_graphs() {}
std::vector<MeasuredStepTime> GpuPreparation::time_steps() { return {}; }
const GpuPreparationCounts& GpuPreparation::counts() const {
  static const GpuPreparationCounts none;
  return none;
}
std::uint64_t GpuPreparation::device_bytes_in_use() const { return 0; }
std::map<std::string, std::string> GpuPreparation::kernel_images() const { return {}; }
std::string GpuPreparation::gemm_tuning_table() const { return ""; }

}  // namespace flare::ignition

#endif
