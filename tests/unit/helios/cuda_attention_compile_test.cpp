// NVRTC compiles the attention kernels with every define set CudaBackend requests (head size 64, 128
// or 256, query heads per decode CTA, BF16 or FP8 pages) for each architecture the backend targets,
// and rejects shapes they do not cover with a message naming the limit. Needs NVRTC, no GPU.
#ifdef FLARE_HAVE_CUDA

#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/cuda/kernel_sources.h"
#include "helios/cuda/nvrtc.h"
#include "nvrtc_support.h"

namespace flare::helios::cuda {
namespace {

using Defines = std::vector<std::pair<std::string, std::string>>;

void expect_compiles(const Nvrtc& nvrtc, const std::string& arch, const char* source, const char* entry,
                     const Defines& defines) {
  CompileOptions o;
  o.arch = arch;
  o.defines = defines;
  std::string label = std::string(source) + " " + arch;
  for (const auto& [name, value] : defines) label += " " + name + "=" + value;
  try {
    const std::string cubin = nvrtc.compile(embedded_kernel(source), o);
    EXPECT_EQ(cubin.compare(0, 4, "\x7f" "ELF"), 0) << label;
    EXPECT_NE(cubin.find(entry), std::string::npos) << entry << " missing in " << label;
  } catch (const Error& e) {
    ADD_FAILURE() << label << ": " << e.what();
  }
}

class CudaAttentionKernels : public testing::TestWithParam<std::string> {};

TEST_P(CudaAttentionKernels, EveryDefineSetCompiles) {
  FLARE_NEED_NVRTC(nvrtc);
  const std::string arch = GetParam();
  for (const char* fp8 : {"0", "1"}) {
    for (const char* head_dim : {"64", "128"}) {
      expect_compiles(*nvrtc, arch, "attention", "flare_kv_store", {{"HEAD_DIM", head_dim}, {"KV_FP8", fp8}});
      expect_compiles(*nvrtc, arch, "attention_prefill", "flare_attention_prefill",
                      {{"HEAD_DIM", head_dim}, {"KV_FP8", fp8}});
      // GROUP: the query heads per decode CTA, the largest divisor <= 16 of the GQA group (the
      // columns of one or two mma n-tiles). Pages of 16 tokens take the one-table-read-per-block
      // path, 7 the per-key one.
      for (const char* group : {"1", "4", "7", "16"}) {
        expect_compiles(*nvrtc, arch, "attention_decode", "flare_attention_decode",
                        {{"HEAD_DIM", head_dim}, {"PAGE_SIZE", "16"}, {"GROUP", group}, {"KV_FP8", fp8}});
      }
      // KV_STAGES: the host's ring depths (2 at head dim 128 and for FP8, 3 at head dim 64 in
      // BF16; fewer, down to 1, where the device's shared memory per CTA cannot hold them).
      for (const char* stages : {"1", "2", "3"}) {
        expect_compiles(*nvrtc, arch, "attention_decode", "flare_attention_decode",
                        {{"HEAD_DIM", head_dim}, {"PAGE_SIZE", "7"}, {"GROUP", "8"}, {"KV_FP8", fp8}, {"KV_STAGES", stages}});
      }
      // QTOK: verify rows of up to 2, 4 or 8 tokens, their columns (GROUP x QTOK) one or two n-tiles.
      for (const auto& [group, qtok] : {std::tuple{"4", "2"}, std::tuple{"4", "4"}, std::tuple{"2", "8"},
                                        std::tuple{"1", "8"}, std::tuple{"3", "4"}}) {
        expect_compiles(*nvrtc, arch, "attention_decode", "flare_attention_decode",
                        {{"HEAD_DIM", head_dim}, {"PAGE_SIZE", "16"}, {"GROUP", group}, {"QTOK", qtok}, {"KV_FP8", fp8}});
      }
    }
    // Head dim 256 (Gemma 3): the prefill kernel's Q-in-shared-memory variant, and the decode kernel
    // with up to 8 heads a CTA: Gemma's group of 2 and GQA 8:1 with 2 ring stages (sm_90's choice),
    // 4 heads and 1 stage (a 99 KiB device's, for a group of 8), and the per-key page path.
    expect_compiles(*nvrtc, arch, "attention", "flare_kv_store", {{"HEAD_DIM", "256"}, {"KV_FP8", fp8}});
    expect_compiles(*nvrtc, arch, "attention_prefill", "flare_attention_prefill",
                    {{"HEAD_DIM", "256"}, {"KV_FP8", fp8}});
    for (const auto& [group, stages, page] : {std::tuple{"2", "2", "16"}, std::tuple{"8", "2", "16"},
                                              std::tuple{"4", "1", "16"}, std::tuple{"8", "1", "7"}}) {
      expect_compiles(*nvrtc, arch, "attention_decode", "flare_attention_decode",
                      {{"HEAD_DIM", "256"}, {"PAGE_SIZE", page}, {"GROUP", group}, {"KV_FP8", fp8},
                       {"KV_STAGES", stages}});
    }
    // Verify rows at head dim 256: one n-tile of columns (2 heads x 4 tokens, 1 x 8).
    for (const auto& [group, qtok] : {std::tuple{"2", "4"}, std::tuple{"1", "8"}}) {
      expect_compiles(*nvrtc, arch, "attention_decode", "flare_attention_decode",
                      {{"HEAD_DIM", "256"}, {"PAGE_SIZE", "16"}, {"GROUP", group}, {"QTOK", qtok}, {"KV_FP8", fp8},
                       {"KV_STAGES", "2"}});
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, CudaAttentionKernels, testing::Values("sm_80", "sm_89", "sm_90", "sm_120"));

TEST(CudaAttentionKernels, UncoveredShapesFailWithTheirLimit) {
  FLARE_NEED_NVRTC(nvrtc);
  const auto error_of = [&](const char* source, const Defines& defines) -> std::string {
    CompileOptions o;
    o.arch = "sm_90";
    o.defines = defines;
    try {
      nvrtc->compile(embedded_kernel(source), o);
    } catch (const Error& e) {
      return e.what();
    }
    return "compiled";
  };
  EXPECT_NE(error_of("attention_decode", {{"HEAD_DIM", "80"}, {"PAGE_SIZE", "16"}})
                .find("supports HEAD_DIM 64, 128 and 256"),
            std::string::npos);
  EXPECT_NE(error_of("attention_decode", {{"HEAD_DIM", "128"}, {"PAGE_SIZE", "16"}, {"GROUP", "17"}}).find("1..16 query heads"),
            std::string::npos);
  EXPECT_NE(error_of("attention_decode", {{"HEAD_DIM", "256"}, {"PAGE_SIZE", "16"}, {"GROUP", "16"}})
                .find("1..8 query heads per CTA at head dim 256"),
            std::string::npos);
  EXPECT_NE(error_of("attention_decode", {{"HEAD_DIM", "128"}, {"PAGE_SIZE", "16"}, {"GROUP", "4"}, {"QTOK", "8"}})
                .find("at most 16 columns"),
            std::string::npos);
  EXPECT_NE(error_of("attention_decode", {{"HEAD_DIM", "128"}}).find("attention_decode needs PAGE_SIZE"),
            std::string::npos);
  EXPECT_NE(error_of("attention_prefill", {{"HEAD_DIM", "512"}}).find("supports HEAD_DIM 64, 128 and 256"),
            std::string::npos);
  EXPECT_NE(error_of("attention_prefill", {}).find("attention_prefill needs HEAD_DIM"), std::string::npos);
}

}  // namespace
}  // namespace flare::helios::cuda

#endif  // FLARE_HAVE_CUDA
