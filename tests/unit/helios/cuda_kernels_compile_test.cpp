// NVRTC compiles every embedded kernel (src/helios/kernels/*.cu) for each architecture the CUDA
// backend targets; compile errors name the kernel and carry the log; compiles go through the
// kernel cache. Needs NVRTC but no GPU; skips where libnvrtc cannot be loaded.
#ifdef FLARE_HAVE_CUDA

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/cuda/kernel_sources.h"
#include "helios/cuda/nvrtc.h"
#include "nvrtc_support.h"

namespace flare::helios::cuda {
namespace {

namespace fs = std::filesystem;

// Shapes of a typical model (head_dim 128, full rotary, pages of 16 tokens); one x-row tile of each
// skinny GEMM (the other tiles instantiate the same templates, and every tile of both takes most of
// a minute per architecture): the BF16 kernel's 16, the FP8 kernels' 2, whose module also holds the
// tensor-core FP8 kernel (sm_89+; a trap below).
CompileOptions options_for(const std::string& arch) {
  CompileOptions o;
  o.arch = arch;
  o.defines = {{"HEAD_DIM", "128"}, {"ROTARY_HALF", "64"}, {"FLARE_BLOCK", "256"}, {"PAGE_SIZE", "16"},
               {"SKINNY_M", "16"},   {"FP8_SKINNY_M", "2"}};
  return o;
}

bool is_elf(const std::string& binary) { return binary.size() > 4 && binary.compare(0, 4, "\x7f" "ELF") == 0; }

TEST(CudaKernels, EmbeddedSourcesAreComplete) {
  std::vector<std::string> names;
  for (const KernelSource& k : embedded_kernels()) {
    names.emplace_back(k.name);
    EXPECT_NE(k.source.find("extern \"C\" __global__"), std::string_view::npos) << k.name;
    EXPECT_NE(k.source.find("flare_" + std::string(k.name)), std::string_view::npos) << k.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"attention", "attention_decode", "attention_prefill", "bias_add",
                                            "embedding", "fill_random", "fp8_linear", "gather_rows", "head_rms_norm", "linear",
                                            "moe_experts", "moe_router", "rms_norm", "rotary", "rotary_kv_store", "sample", "scale", "skinny_gemm",
                                            "stream_gemm", "swiglu"}));
  EXPECT_EQ(embedded_kernel("rotary").name, "rotary");
  EXPECT_THROW(embedded_kernel("no_such_kernel"), Error);
  // Headers are not modules: named with their extension, included by the modules that use them.
  std::vector<std::string> headers;
  for (const KernelSource& h : embedded_kernel_headers()) {
    headers.emplace_back(h.name);
    EXPECT_EQ(h.source.find("extern \"C\" __global__"), std::string_view::npos) << h.name;
  }
  EXPECT_EQ(headers, (std::vector<std::string>{"moe_weight_formats.cuh"}));
  EXPECT_NE(embedded_kernel("moe_experts").source.find("#include \"moe_weight_formats.cuh\""), std::string_view::npos);
}

class CudaKernelsPerArch : public testing::TestWithParam<std::string> {};

TEST_P(CudaKernelsPerArch, EveryKernelCompilesToACubin) {
  FLARE_NEED_NVRTC(nvrtc);
  for (const KernelSource& k : embedded_kernels()) {
    const std::string cubin = nvrtc->compile(k, options_for(GetParam()));
    EXPECT_TRUE(is_elf(cubin)) << k.name << " for " << GetParam();
    EXPECT_NE(cubin.find("flare_" + std::string(k.name)), std::string::npos) << "entry point missing in " << k.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, CudaKernelsPerArch, testing::Values("sm_80", "sm_89", "sm_90", "sm_120"));

// moe_experts holds every product in all three weight formats (BF16, gpt-oss's MXFP4 and Qwen3's
// FP8 block-scaled) for all three paths (the fused decode GEMVs, the GEMVs over the align kernel's
// tiles, the tensor-core GEMMs).
TEST_P(CudaKernelsPerArch, MoeExpertsHasEveryWeightFormat) {
  FLARE_NEED_NVRTC(nvrtc);
  const std::string cubin = nvrtc->compile(embedded_kernel("moe_experts"), options_for(GetParam()));
  for (const char* path : {"fused", "gemv", "mma"}) {
    for (const char* product : {"gate_up", "down"}) {
      for (const char* format : {"", "_mxfp4", "_fp8"}) {
        const std::string entry = std::string("flare_moe_experts_") + path + "_" + product + format;
        EXPECT_NE(cubin.find(entry + '\0'), std::string::npos) << entry << " missing for " << GetParam();
      }
    }
  }
}

// The sampler as CudaBackend builds it (FLARE_BLOCK 512, whose register budget its double-precision
// bucket sums must fit): one CTA a row everywhere, and a cluster of 8 where clusters exist (sm_90+).
TEST_P(CudaKernelsPerArch, SamplerCompilesWithTheBackendsBlockSize) {
  FLARE_NEED_NVRTC(nvrtc);
  std::vector<std::string> clusters = {"1"};
  if (GetParam() == "sm_90" || GetParam() == "sm_120") clusters.push_back("8");
  for (const std::string& ctas : clusters) {
    CompileOptions o;
    o.arch = GetParam();
    o.defines = {{"FLARE_CLUSTER", ctas}};
    const std::string cubin = nvrtc->compile(embedded_kernel("sample"), o);
    EXPECT_TRUE(is_elf(cubin)) << GetParam() << " with " << ctas << " CTAs a row";
    EXPECT_NE(cubin.find("flare_sample"), std::string::npos);
  }
}

// The stream GEMM's wgmma and TMA need the architecture-specific target: for sm_90a every x-row
// tile compiles with its body; for the other targets (above) its entry points are empty.
TEST(CudaKernels, StreamGemmCompilesForHopperWithItsBody) {
  FLARE_NEED_NVRTC(nvrtc);
  CompileOptions plain;
  plain.arch = "sm_90";
  const std::size_t empty_size = nvrtc->compile(embedded_kernel("stream_gemm"), plain).size();
  for (const std::string tile : {"32", "64", "128"}) {
    CompileOptions o;
    o.arch = "sm_90a";
    o.defines = {{"STREAM_N", tile}};
    const std::string cubin = nvrtc->compile(embedded_kernel("stream_gemm"), o);
    EXPECT_TRUE(is_elf(cubin)) << tile;
    EXPECT_NE(cubin.find("flare_stream_gemm_n" + tile + "_bf16"), std::string::npos) << tile;
    EXPECT_NE(cubin.find("flare_stream_gemm_n" + tile + "_f32"), std::string::npos) << tile;
    EXPECT_GT(cubin.size(), empty_size + 4096) << "the sm_90a build of tile " << tile << " has no body";
  }
  CompileOptions bad;
  bad.arch = "sm_90a";
  bad.defines = {{"STREAM_N", "48"}};
  EXPECT_THROW(nvrtc->compile(embedded_kernel("stream_gemm"), bad), Error);
}

TEST(CudaKernels, CompileErrorNamesTheKernelAndShowsTheLog) {
  FLARE_NEED_NVRTC(nvrtc);
  const KernelSource broken{"broken_kernel", "extern \"C\" __global__ void flare_broken(int* x) { x[0] = undeclared_name; }\n"};
  try {
    nvrtc->compile(broken, options_for("sm_90"));
    FAIL() << "a broken kernel compiled";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.code(), ExitCode::preparation);
    EXPECT_NE(message.find("broken_kernel"), std::string::npos) << message;
    EXPECT_NE(message.find("sm_90"), std::string::npos) << message;
    EXPECT_NE(message.find("undeclared_name"), std::string::npos) << message;  // from NVRTC's log
  }
}

TEST(CudaKernels, MissingShapeDefineIsACompileError) {
  FLARE_NEED_NVRTC(nvrtc);
  CompileOptions o;
  o.arch = "sm_90";
  try {
    nvrtc->compile(embedded_kernel("rotary"), o);
    FAIL() << "rotary compiled without its shapes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rotary needs HEAD_DIM"), std::string::npos) << e.what();
  }
}

TEST(CudaKernels, OptionsAreValidated) {
  FLARE_NEED_NVRTC(nvrtc);
  for (const char* arch : {"", "sm_", "sm90", "compute_90", "sm_90 -DX=1", "sm_9x", "sm_90ab"}) {
    CompileOptions o = options_for(arch);
    EXPECT_THROW(nvrtc->option_list(o), Error) << arch;
  }
  for (const char* name : {"", "1X", "A B", "X=Y", "-I/tmp"}) {
    CompileOptions o = options_for("sm_90");
    o.defines = {{name, "1"}};
    EXPECT_THROW(nvrtc->option_list(o), Error) << name;
  }
  CompileOptions multi_line = options_for("sm_90");
  multi_line.defines = {{"X", "1\n#include </etc/passwd>"}};
  EXPECT_THROW(nvrtc->option_list(multi_line), Error);

  const std::vector<std::string> list = nvrtc->option_list(options_for("sm_90a"));
  EXPECT_EQ(list.front(), "--gpu-architecture=sm_90a");
  EXPECT_NE(std::find(list.begin(), list.end(), "-DHEAD_DIM=128"), list.end());
  EXPECT_EQ(std::find(list.begin(), list.end(), "--use_fast_math"), list.end());
}

TEST(CudaKernels, CompilesGoThroughTheCache) {
  FLARE_NEED_NVRTC(nvrtc);
  const fs::path dir = fs::temp_directory_path() /
                       ("flare-nvrtc-cache-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
  {
    KernelCache cache(dir);
    const KernelSource& k = embedded_kernel("swiglu");
    const std::string first = nvrtc->compile_cached(cache, k, options_for("sm_90"));
    const std::string again = nvrtc->compile_cached(cache, k, options_for("sm_90"));
    EXPECT_EQ(first, again);
    EXPECT_EQ(cache.n_builds(), 1);
    EXPECT_EQ(cache.n_hits(), 1);
    EXPECT_EQ(cache.n_misses(), 1);
    // Another architecture or shape is another entry.
    nvrtc->compile_cached(cache, k, options_for("sm_80"));
    CompileOptions other = options_for("sm_90");
    other.defines.push_back({"UNUSED_SHAPE", "7"});
    nvrtc->compile_cached(cache, k, other);
    EXPECT_EQ(cache.n_builds(), 3);

    KernelCache reopened(dir);  // a later process: zero compiles
    EXPECT_EQ(nvrtc->compile_cached(reopened, k, options_for("sm_90")), first);
    EXPECT_EQ(reopened.n_builds(), 0);
    EXPECT_EQ(reopened.n_hits(), 1);
  }
  fs::remove_all(dir);
}

TEST(CudaKernels, MissingToolkitFallsBackToTheLoaderPathOrSaysWhy) {
  std::string reason;
  const std::unique_ptr<Nvrtc> n = Nvrtc::try_load("/nonexistent/cuda", &reason);
  if (n) {
    EXPECT_EQ(n->library_path(), "libnvrtc.so.13");
  } else {
    EXPECT_NE(reason.find("/nonexistent/cuda/lib64/libnvrtc.so.13"), std::string::npos) << reason;
    EXPECT_THROW(Nvrtc("/nonexistent/cuda"), Error);
  }
}

}  // namespace
}  // namespace flare::helios::cuda

#endif  // FLARE_HAVE_CUDA
