// The skinny GEMM's host side without a GPU: which problems it takes (m, k, alignment), its m tiles,
// and that every entry point the host loads exists in the compiled kernel (NVRTC, sm_90), so host
// and kernel agree on the names. Skips the compile where libnvrtc cannot be loaded.
#ifdef FLARE_HAVE_CUDA

#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/cuda/gemm_runner.h"
#include "helios/cuda/kernel_sources.h"
#include "helios/cuda/nvrtc.h"
#include "helios/cuda/skinny_gemm.h"

namespace flare::helios::cuda {
namespace {

GemmOperands decode_problem() {
  return {.x = 0x10000, .x_stride = 4096, .w = 0x20000, .w_stride = 4096, .bias = 0, .out = 0x30002,
          .out_stride = 6145, .out_dtype = DType::bf16, .m = 1, .n = 6144, .k = 4096};
}

TEST(SkinnyGemm, TakesSmallMWithAlignedRowsOnly) {
  EXPECT_TRUE(SkinnyGemm::supports(decode_problem())) << "outputs need no alignment";
  const auto with = [](auto change) {
    GemmOperands op = decode_problem();
    change(op);
    return SkinnyGemm::supports(op);
  };
  EXPECT_TRUE(with([](GemmOperands& op) { op.m = 16; }));
  EXPECT_TRUE(with([](GemmOperands& op) { op.m = 13; }));
  EXPECT_TRUE(with([](GemmOperands& op) { op.n = 1; }));
  EXPECT_TRUE(with([](GemmOperands& op) { op.k = 8, op.x_stride = 8, op.w_stride = 24; }));
  EXPECT_TRUE(with([](GemmOperands& op) { op.out_dtype = DType::f32, op.bias = 0x40004; }));
  EXPECT_FALSE(with([](GemmOperands& op) { op.m = 17; }));
  EXPECT_FALSE(with([](GemmOperands& op) { op.m = 0; }));
  EXPECT_FALSE(with([](GemmOperands& op) { op.k = 4100; })) << "k % 8 != 0";
  EXPECT_FALSE(with([](GemmOperands& op) { op.x = 0x10008; })) << "x 8-byte aligned";
  EXPECT_FALSE(with([](GemmOperands& op) { op.w = 0x20002; })) << "w 2-byte aligned";
  EXPECT_FALSE(with([](GemmOperands& op) { op.x_stride = 4100; })) << "x rows 8-byte aligned";
  EXPECT_FALSE(with([](GemmOperands& op) { op.w_stride = 4097; })) << "w rows 2-byte aligned";
  EXPECT_FALSE(with([](GemmOperands& op) { op.out_dtype = DType::f8_e4m3; }));
  EXPECT_FALSE(with([](GemmOperands& op) { op.n = std::int64_t(1) << 31; }));
}

TEST(SkinnyGemm, TilesAreTheSmallestPowerOfTwoAtLeastM) {
  const int expected[17] = {0, 1, 2, 4, 4, 8, 8, 8, 8, 16, 16, 16, 16, 16, 16, 16, 16};
  for (int m = 1; m <= 16; ++m) {
    EXPECT_EQ(SkinnyGemm::m_tile(m), expected[m]) << m;
    EXPECT_EQ(SkinnyGemm::m_tile(m), GemmTuning::bucket_m(m)) << "a tuning bucket maps onto one tile";
  }
  EXPECT_EQ(SkinnyGemm::entry_name(4, 3, DType::f32), "flare_skinny_gemm_m4_v3_f32");
  EXPECT_EQ(SkinnyGemm::entry_name(16, 0, DType::bf16), "flare_skinny_gemm_m16_v0_bf16");
}

TEST(SkinnyGemm, EveryEntryPointTheHostLoadsIsCompiled) {
  std::string reason;
  const std::unique_ptr<Nvrtc> nvrtc = Nvrtc::try_load(k_default_cuda_root, &reason);
  if (!nvrtc) GTEST_SKIP() << "NVRTC unavailable: " << reason;
  // One module per tile, as the backend builds them: each holds its tile's entry points only.
  for (const int tile : SkinnyGemm::k_tiles) {
    CompileOptions o;
    o.arch = "sm_90";
    o.defines = {{"SKINNY_M", std::to_string(tile)}};
    const std::string cubin = nvrtc->compile(embedded_kernel(k_skinny_gemm_source), o);
    for (const int other : SkinnyGemm::k_tiles) {
      for (int v = 0; v < k_skinny_gemm_n_variants; ++v) {
        for (const DType out : {DType::bf16, DType::f32}) {
          // NUL-terminated in the symbol table, so m1 does not match m16.
          const std::string name = SkinnyGemm::entry_name(other, v, out);
          EXPECT_EQ(cubin.find(name + '\0') != std::string::npos, other == tile) << name << " in tile " << tile;
        }
      }
    }
    EXPECT_EQ(cubin.find(SkinnyGemm::entry_name(tile, k_skinny_gemm_n_variants, DType::bf16) + '\0'), std::string::npos)
        << "the kernel has exactly the host's variants";
  }
  CompileOptions bad;
  bad.arch = "sm_90";
  bad.defines = {{"SKINNY_M", "3"}};
  try {
    nvrtc->compile(embedded_kernel(k_skinny_gemm_source), bad);
    ADD_FAILURE() << "SKINNY_M=3 compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SKINNY_M must be 1, 2, 4, 8 or 16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flare::helios::cuda

#endif  // FLARE_HAVE_CUDA
