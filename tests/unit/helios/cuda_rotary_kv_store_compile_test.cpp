// NVRTC compiles the fused rotary + KV store kernel (rotary_kv_store.cu) with every define set
// CudaBackend requests: the head sizes of the supported families and an odd one, full and partial
// rotary, BF16 and FP8 pages, for each architecture the backend targets; and the vector entry
// points of rms_norm, swiglu and geglu and the entry points of scale.cu exist. Needs NVRTC, no GPU.
#ifdef FLARE_HAVE_CUDA

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/cuda/kernel_sources.h"
#include "helios/cuda/nvrtc.h"
#include "nvrtc_support.h"

namespace flare::helios::cuda {
namespace {

std::string compile(const Nvrtc& nvrtc, const std::string& arch, const char* source,
                    std::vector<std::pair<std::string, std::string>> defines) {
  CompileOptions o;
  o.arch = arch;
  o.defines = std::move(defines);
  return nvrtc.compile(embedded_kernel(source), o);
}

class CudaFusedKernels : public testing::TestWithParam<std::string> {};

TEST_P(CudaFusedKernels, EveryDefineSetCompiles) {
  FLARE_NEED_NVRTC(nvrtc);
  struct Shape {
    const char* head_dim;
    const char* half;
  };
  for (const Shape& s : {Shape{"64", "32"}, Shape{"128", "64"}, Shape{"128", "32"}, Shape{"80", "40"}, Shape{"256", "128"}}) {
    for (const char* fp8 : {"0", "1"}) {
      const std::string label = GetParam() + " HEAD_DIM=" + s.head_dim + " ROTARY_HALF=" + s.half + " KV_FP8=" + fp8;
      try {
        const std::string cubin = compile(*nvrtc, GetParam(), "rotary_kv_store",
                                          {{"HEAD_DIM", s.head_dim}, {"ROTARY_HALF", s.half}, {"KV_FP8", fp8}});
        EXPECT_NE(cubin.find("flare_rotary_kv_store"), std::string::npos) << label;
      } catch (const Error& e) {
        ADD_FAILURE() << label << ": " << e.what();
      }
    }
  }
  // The vector paths CudaBackend picks beside the general kernels (no defines, as it builds them).
  const std::string norm = compile(*nvrtc, GetParam(), "rms_norm", {});
  EXPECT_NE(norm.find("flare_rms_norm_vec"), std::string::npos);
  const std::string swiglu = compile(*nvrtc, GetParam(), "swiglu", {});
  for (const char* entry : {"flare_swiglu_vec", "flare_geglu_vec", "flare_geglu"}) {
    EXPECT_NE(swiglu.find(entry), std::string::npos) << entry;
  }
  // Gemma's in-place scalings (no defines).
  const std::string scale = compile(*nvrtc, GetParam(), "scale", {});
  for (const char* entry : {"flare_scale_bf16", "flare_scale_f32", "flare_soft_cap_f32"}) {
    EXPECT_NE(scale.find(entry), std::string::npos) << entry;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, CudaFusedKernels, testing::Values("sm_80", "sm_89", "sm_90", "sm_120"));

TEST(CudaFusedKernels, RotaryWiderThanTheHeadIsACompileError) {
  FLARE_NEED_NVRTC(nvrtc);
  try {
    compile(*nvrtc, "sm_90", "rotary_kv_store", {{"HEAD_DIM", "64"}, {"ROTARY_HALF", "33"}});
    FAIL() << "a rotary dim past the head compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rotary dim"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flare::helios::cuda

#endif  // FLARE_HAVE_CUDA
