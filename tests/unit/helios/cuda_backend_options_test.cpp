// CudaBackendOptions without a GPU: the defaults keep the behaviour the backend had before the
// switches were options (dependent launch for the early-work kernels on sm_90+, the sampler's
// cluster of 8 with shared slices), and each switch changes only what it names.
#ifdef FLARE_HAVE_CUDA

#include <gtest/gtest.h>

#include "helios/cuda/cuda_backend_options.h"
#include "helios/cuda/cuda_sampler.h"
#include "helios/cuda/driver.h"

namespace flare::helios::cuda {
namespace {

constexpr DependentLaunch k_modes[] = {DependentLaunch::early_work, DependentLaunch::all, DependentLaunch::off};

DeviceInfo device(int compute_major, int max_shared_bytes_per_block) {
  DeviceInfo d;
  d.compute_major = compute_major;
  d.max_shared_bytes_per_block = max_shared_bytes_per_block;
  return d;
}

const DeviceInfo k_sm90 = device(9, 232448), k_sm80 = device(8, 166912);

TEST(CudaBackendOptions, DefaultsAreWhatFlareRunServesWith) {
  const CudaBackendOptions o;
  EXPECT_TRUE(o.stream_gemm);
  EXPECT_EQ(o.dependent_launch, DependentLaunch::early_work);
  EXPECT_FALSE(o.gemm_race_log);
  EXPECT_FALSE(o.sampler_one_cta);
  EXPECT_FALSE(o.sampler_global_slices);
}

TEST(CudaBackendOptions, DependentLaunchModes) {
  // The default: only the kernels with early work overlap, on sm_90+.
  EXPECT_TRUE(early_work_programmatic_launch(k_sm90, DependentLaunch::early_work));
  EXPECT_FALSE(programmatic_launch(k_sm90, DependentLaunch::early_work));
  EXPECT_TRUE(early_work_programmatic_launch(k_sm90, DependentLaunch::all));
  EXPECT_TRUE(programmatic_launch(k_sm90, DependentLaunch::all));
  EXPECT_FALSE(early_work_programmatic_launch(k_sm90, DependentLaunch::off));
  EXPECT_FALSE(programmatic_launch(k_sm90, DependentLaunch::off));
  for (const DependentLaunch mode : k_modes) {  // before sm_90, never
    EXPECT_FALSE(early_work_programmatic_launch(k_sm80, mode)) << dependent_launch_name(mode);
    EXPECT_FALSE(programmatic_launch(k_sm80, mode)) << dependent_launch_name(mode);
  }
  EXPECT_EQ(dependent_launch_name(DependentLaunch::early_work), "early-work");
  EXPECT_EQ(dependent_launch_name(DependentLaunch::all), "all");
  EXPECT_EQ(dependent_launch_name(DependentLaunch::off), "off");
}

TEST(CudaBackendOptions, SamplerLayouts) {
  using Defines = std::vector<std::pair<std::string, std::string>>;
  // Default on sm_90: a cluster of 8 a row, Qwen's 151936 ids in slices of 18992 in shared memory.
  SamplerLayout l = sampler_layout(k_sm90, 151936, {});
  EXPECT_EQ(l.ctas, 8);
  EXPECT_EQ(l.slice, 18992);
  EXPECT_TRUE(l.in_shared);
  EXPECT_EQ(sampler_defines(l), (Defines{{"FLARE_CLUSTER", "8"}}));
  // One CTA a row: another module; 151936 ids no longer fit its shared memory, 32000 do.
  l = sampler_layout(k_sm90, 151936, {.sampler_one_cta = true});
  EXPECT_EQ(l.ctas, 1);
  EXPECT_EQ(l.slice, 151936);
  EXPECT_FALSE(l.in_shared);
  EXPECT_EQ(sampler_defines(l), (Defines{{"FLARE_CLUSTER", "1"}}));
  EXPECT_TRUE(sampler_layout(k_sm90, 32000, {.sampler_one_cta = true}).in_shared);
  // Global slices: the same cluster (and module), slices read from global memory.
  l = sampler_layout(k_sm90, 151936, {.sampler_global_slices = true});
  EXPECT_EQ(l.ctas, 8);
  EXPECT_FALSE(l.in_shared);
  // Before sm_90: one CTA a row whatever the options say.
  EXPECT_EQ(sampler_layout(k_sm80, 32000, {}).ctas, 1);
  EXPECT_TRUE(sampler_layout(k_sm80, 32000, {}).in_shared);
}

}  // namespace
}  // namespace flare::helios::cuda

#endif  // FLARE_HAVE_CUDA
