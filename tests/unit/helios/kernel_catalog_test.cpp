// The CUDA backend's kernel catalog without a GPU: on fixed device facts, the Llama-3.1-8B and
// Gemma-3-12B shapes (their bench configs, through model::kernel_needs) give exactly the expected
// module keys; the device facts and options that pick defines (shared memory per CTA, clusters,
// cuBLASLt, the stream GEMM, one-CTA sampling) and the KV dtypes change only the modules they name;
// and shapes the backend cannot serve are refused as they would be at launch.
#ifdef FLARE_HAVE_CUDA

#include <algorithm>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "common/error.h"
#include "helios/cuda/kernel_catalog.h"
#include "model/kernel_needs.h"
#include "model/spec.h"

namespace flare::helios::cuda {
namespace {

// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN of an H200 and of an sm_89 device.
constexpr int k_sm90_bytes = 232448, k_sm89_bytes = 101376;

const KernelPlatform k_h200{.compute_major = 9, .compute_minor = 0, .max_shared_bytes_per_block = k_sm90_bytes,
                            .cublaslt = true, .stream_gemm = true, .sampler_one_cta = false};
const KernelPlatform k_sm89{.compute_major = 8, .compute_minor = 9, .max_shared_bytes_per_block = k_sm89_bytes,
                            .cublaslt = true, .stream_gemm = false, .sampler_one_cta = false};

std::string bench_config(const std::string& name) {
  std::ifstream in(std::string(FLARE_SOURCE_DIR) + "/bench/configs/" + name + "/config.json");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_FALSE(text.str().empty()) << name;
  return text.str();
}

model::ServingSettings serving(std::vector<DType> kv = {DType::bf16}) {
  return {.decode_buckets = serving_decode_buckets(64), .prefill_chunk_tokens = 2048, .page_size_tokens = 16,
          .kv_dtypes = std::move(kv)};
}

KernelNeeds needs_of(const std::string& config_json, std::vector<DType> kv = {DType::bf16}) {
  return model::kernel_needs(model::model_spec_parse(config_json, "bench config"), serving(std::move(kv)));
}

// What every H200 backend with cuBLASLt loads whatever the model: the constructor's fixed modules.
const std::vector<std::string> k_h200_fixed = {
    "bias_add",
    "embedding",
    "gather_rows",
    "linear",
    "rms_norm",
    "sample -DFLARE_CLUSTER=8",
    "scale",
    "skinny_gemm -DSKINNY_M=1",
    "skinny_gemm -DSKINNY_M=16",
    "skinny_gemm -DSKINNY_M=2",
    "skinny_gemm -DSKINNY_M=4",
    "skinny_gemm -DSKINNY_M=8",
    "stream_gemm -DSTREAM_N=128 -DFLARE_ARCH_SPECIFIC=1",
    "stream_gemm -DSTREAM_N=32 -DFLARE_ARCH_SPECIFIC=1",
    "stream_gemm -DSTREAM_N=64 -DFLARE_ARCH_SPECIFIC=1",
    "swiglu",
};

std::vector<std::string> with_fixed(const std::vector<std::string>& fixed, std::vector<std::string> extra) {
  extra.insert(extra.end(), fixed.begin(), fixed.end());
  std::ranges::sort(extra);
  return extra;
}

TEST(KernelCatalog, Llama31_8bOnAnH200) {
  const KernelNeeds needs = needs_of(bench_config("llama-3.1-8b"));
  ASSERT_EQ(needs.attention, (std::vector<AttentionNeeds>{{32, 8, 128, 64}}));
  EXPECT_FALSE(needs.fp8_linears);
  const ServingCatalog catalog = kernel_catalog(k_h200, needs);
  // Verify rows of up to 2, 4 and 8 tokens: 4 heads x 2 or 4 tokens, 2 heads x 8 an item.
  EXPECT_EQ(catalog.modules, with_fixed(k_h200_fixed, {
                                 "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DKV_FP8=0 -DKV_STAGES=2",
                                 "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DQTOK=2 -DKV_FP8=0 -DKV_STAGES=2",
                                 "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DQTOK=4 -DKV_FP8=0 -DKV_STAGES=2",
                                 "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=2 -DQTOK=8 -DKV_FP8=0 -DKV_STAGES=2",
                                 "attention_prefill -DHEAD_DIM=128 -DKV_FP8=0",
                                 "rotary_kv_store -DHEAD_DIM=128 -DROTARY_HALF=64 -DKV_FP8=0",
                             }));
  // The graphs: the prefill chunk with and without logits, then decode buckets 64 down to 1.
  ASSERT_EQ(catalog.graphs.size(), 9u);
  EXPECT_EQ(catalog.graphs[0], (StepShape{1, 2048, 0, DType::bf16}));
  EXPECT_EQ(catalog.graphs[1], (StepShape{1, 2048, 1, DType::bf16}));
  EXPECT_EQ(catalog.graphs[2], (StepShape{64, 1, 1, DType::bf16}));
  EXPECT_EQ(catalog.graphs[8], (StepShape{1, 1, 1, DType::bf16}));
  EXPECT_EQ(catalog.platform, k_h200);
  EXPECT_EQ(catalog.needs, needs);
}

// Gemma 3: head dim 256, sliding and global layers (one attention shape: a window is an argument),
// GeGLU (swiglu.cu), a logit soft cap (scale.cu): none of the last three adds a module.
TEST(KernelCatalog, Gemma3_12bOnAnH200) {
  std::string config = bench_config("gemma-3-12b");
  const std::string no_cap = "\"final_logit_softcapping\": null";
  ASSERT_NE(config.find(no_cap), std::string::npos);
  const KernelNeeds uncapped = needs_of(config);
  config.replace(config.find(no_cap), no_cap.size(), "\"final_logit_softcapping\": 30.0");
  const model::ModelSpec spec = model::model_spec_parse(config, "bench config");
  ASSERT_EQ(spec.final_logit_softcap, 30.0f);
  ASSERT_GT(spec.layers[0].sliding_window, 0);
  ASSERT_EQ(spec.layers[5].sliding_window, 0);
  const KernelNeeds needs = model::kernel_needs(spec, serving());
  EXPECT_EQ(needs, uncapped);
  ASSERT_EQ(needs.attention, (std::vector<AttentionNeeds>{{16, 8, 256, 128}}));
  EXPECT_EQ(needs.vocab_size, 262208);
  const std::vector<std::string> expected = with_fixed(k_h200_fixed, {
      "attention_decode -DHEAD_DIM=256 -DPAGE_SIZE=16 -DGROUP=2 -DKV_FP8=0 -DKV_STAGES=2",
      "attention_decode -DHEAD_DIM=256 -DPAGE_SIZE=16 -DGROUP=2 -DQTOK=2 -DKV_FP8=0 -DKV_STAGES=2",
      "attention_decode -DHEAD_DIM=256 -DPAGE_SIZE=16 -DGROUP=2 -DQTOK=4 -DKV_FP8=0 -DKV_STAGES=2",
      "attention_decode -DHEAD_DIM=256 -DPAGE_SIZE=16 -DGROUP=1 -DQTOK=8 -DKV_FP8=0 -DKV_STAGES=2",
      "attention_prefill -DHEAD_DIM=256 -DKV_FP8=0",
      "rotary_kv_store -DHEAD_DIM=256 -DROTARY_HALF=128 -DKV_FP8=0",
  });
  EXPECT_EQ(kernel_catalog(k_h200, needs).modules, expected);
}

// A 99 KiB device: no clusters (one CTA a row), no stream GEMM, one ring stage at head dim 256; verify
// rows of up to 4 tokens fit a CTA (1 head x 4 tokens at 4), 8 tokens' columns do not (the prefill
// kernel takes them: verify_attention).
TEST(KernelCatalog, Gemma3_12bOnA99KibDevice) {
  const std::vector<std::string> fixed = {"bias_add", "embedding", "gather_rows", "linear", "rms_norm",
                                          "sample -DFLARE_CLUSTER=1", "scale", "skinny_gemm -DSKINNY_M=1",
                                          "skinny_gemm -DSKINNY_M=16", "skinny_gemm -DSKINNY_M=2",
                                          "skinny_gemm -DSKINNY_M=4", "skinny_gemm -DSKINNY_M=8", "swiglu"};
  EXPECT_EQ(kernel_catalog(k_sm89, needs_of(bench_config("gemma-3-12b"))).modules,
            with_fixed(fixed, {
                "attention_decode -DHEAD_DIM=256 -DPAGE_SIZE=16 -DGROUP=2 -DKV_FP8=0 -DKV_STAGES=1",
                "attention_decode -DHEAD_DIM=256 -DPAGE_SIZE=16 -DGROUP=2 -DQTOK=2 -DKV_FP8=0 -DKV_STAGES=1",
                "attention_decode -DHEAD_DIM=256 -DPAGE_SIZE=16 -DGROUP=1 -DQTOK=4 -DKV_FP8=0 -DKV_STAGES=1",
                "attention_prefill -DHEAD_DIM=256 -DKV_FP8=0",
                "rotary_kv_store -DHEAD_DIM=256 -DROTARY_HALF=128 -DKV_FP8=0",
            }));
}

// FP8 pages double the attention and KV-store modules; nothing else changes.
TEST(KernelCatalog, Fp8KvAddsItsOwnVariants) {
  const KernelNeeds needs = needs_of(bench_config("llama-3.1-8b"), {DType::bf16, DType::f8_e4m3});
  EXPECT_EQ(kernel_catalog(k_h200, needs).modules,
            with_fixed(k_h200_fixed, {
                "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DKV_FP8=0 -DKV_STAGES=2",
                "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DKV_FP8=1 -DKV_STAGES=2",
                "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DQTOK=2 -DKV_FP8=0 -DKV_STAGES=2",
                "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DQTOK=2 -DKV_FP8=1 -DKV_STAGES=2",
                "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DQTOK=4 -DKV_FP8=0 -DKV_STAGES=2",
                "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DQTOK=4 -DKV_FP8=1 -DKV_STAGES=2",
                "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=2 -DQTOK=8 -DKV_FP8=0 -DKV_STAGES=2",
                "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=2 -DQTOK=8 -DKV_FP8=1 -DKV_STAGES=2",
                "attention_prefill -DHEAD_DIM=128 -DKV_FP8=0",
                "attention_prefill -DHEAD_DIM=128 -DKV_FP8=1",
                "rotary_kv_store -DHEAD_DIM=128 -DROTARY_HALF=64 -DKV_FP8=0",
                "rotary_kv_store -DHEAD_DIM=128 -DROTARY_HALF=64 -DKV_FP8=1",
            }));
  EXPECT_EQ(kernel_catalog(k_h200, needs).graphs.size(), 18u);
}

TEST(KernelCatalog, PlatformChoicesChangeOnlyTheirModules) {
  const KernelNeeds needs = needs_of(bench_config("llama-3.1-8b"));
  const std::vector<std::string> base = kernel_catalog(k_h200, needs).modules;
  const auto without = [&](const std::string& prefix) {
    std::vector<std::string> out;
    for (const std::string& key : base) {
      if (key.rfind(prefix, 0) != 0) out.push_back(key);
    }
    return out;
  };
  KernelPlatform p = k_h200;
  p.stream_gemm = false;
  EXPECT_EQ(kernel_catalog(p, needs).modules, without("stream_gemm"));
  p = k_h200;
  p.cublaslt = false;
  p.stream_gemm = false;  // the stream GEMM races only beside cuBLASLt
  std::vector<std::string> no_lt = without("stream_gemm");
  std::erase_if(no_lt, [](const std::string& key) { return key == "bias_add" || key.starts_with("skinny_gemm"); });
  EXPECT_EQ(kernel_catalog(p, needs).modules, no_lt);
  p = k_h200;
  p.sampler_one_cta = true;
  std::vector<std::string> one_cta = base;
  std::ranges::replace(one_cta, std::string("sample -DFLARE_CLUSTER=8"), std::string("sample -DFLARE_CLUSTER=1"));
  EXPECT_EQ(kernel_catalog(p, needs).modules, one_cta);
}

TEST(KernelCatalog, Fp8ProjectionsAddTheFp8TilesWithCublasLtOnly) {
  KernelNeeds needs = needs_of(bench_config("llama-3.1-8b"));
  const std::size_t n_base = kernel_catalog(k_h200, needs).modules.size();
  needs.fp8_linears = true;
  const std::vector<std::string> modules = kernel_catalog(k_h200, needs).modules;
  EXPECT_EQ(modules.size(), n_base + 4);
  for (const char* tile : {"1", "2", "4", "8"}) {
    EXPECT_TRUE(std::ranges::binary_search(modules, std::string("fp8_linear -DFP8_SKINNY_M=") + tile)) << tile;
  }
  KernelPlatform no_lt = k_h200;
  no_lt.cublaslt = false;
  no_lt.stream_gemm = false;
  for (const std::string& key : kernel_catalog(no_lt, needs).modules) EXPECT_FALSE(key.starts_with("fp8_linear")) << key;
}

TEST(KernelCatalog, PlainAttentionForOtherHeadSizesAndBf16PagesOnly) {
  KernelNeeds needs = needs_of(bench_config("llama-3.1-8b"));
  needs.attention = {{12, 4, 96, 48}};
  const std::vector<std::string> modules = kernel_catalog(k_h200, needs).modules;
  EXPECT_TRUE(std::ranges::binary_search(modules, std::string("attention -DHEAD_DIM=96")));
  for (const std::string& key : modules) EXPECT_FALSE(key.starts_with("attention_")) << key;
  needs.kv_dtypes = {DType::bf16, DType::f8_e4m3};
  try {
    kernel_catalog(k_h200, needs);
    FAIL() << "FP8 pages at head size 96 were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage) << e.what();
  }
}

// The choosers the launch sites call, on their own.
TEST(KernelCatalog, ChoosersMatchTheDecodePlan) {
  const DecodeAttention d = decode_attention(32, 8, 128, 16, DType::bf16, k_sm90_bytes);
  EXPECT_EQ(d.heads_per_cta, 4);
  EXPECT_EQ(d.stages, 2);
  EXPECT_EQ(d.smem_bytes, 2u * 64 * 2 * 128 * 2 + 4u * 4 * (128 + 4) * 4);
  EXPECT_EQ(d.module.key(), "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=16 -DGROUP=4 -DKV_FP8=0 -DKV_STAGES=2");
  EXPECT_EQ(decode_attention(8, 8, 64, 16, DType::bf16, k_sm90_bytes).stages, 3);
  EXPECT_EQ(decode_attention(64, 8, 128, 32, DType::f8_e4m3, k_sm90_bytes).module.key(),
            "attention_decode -DHEAD_DIM=128 -DPAGE_SIZE=32 -DGROUP=8 -DKV_FP8=1 -DKV_STAGES=2");
  const PrefillAttention p = prefill_attention(256, DType::bf16, k_sm90_bytes);
  EXPECT_EQ(p.warps, 4);
  EXPECT_EQ(p.smem_bytes, 98304u);
  EXPECT_THROW(prefill_attention(256, DType::bf16, 65536), Error);  // the tiles do not fit
  EXPECT_EQ(prefill_attention(128, DType::bf16, 65536).smem_bytes, 0u);
  EXPECT_THROW(kv_fp8_define(DType::f32), Error);
  EXPECT_EQ(module_key("rotary", {{"HEAD_DIM", "64"}, {"ROTARY_HALF", "32"}}), "rotary -DHEAD_DIM=64 -DROTARY_HALF=32");
  EXPECT_EQ(rotary_module(64, 32).key(), "rotary -DHEAD_DIM=64 -DROTARY_HALF=32");
}

// Verify rows: the launch site's chooser picks the module of the smallest QTOK holding the step's
// longest row, which the catalog lists; longer rows and uncovered head sizes take the prefill kernel.
TEST(KernelCatalog, VerifyChooserPicksCatalogModules) {
  const KernelNeeds needs = needs_of(bench_config("llama-3.1-8b"));
  const ServingCatalog catalog = kernel_catalog(k_h200, needs);
  for (int tokens = 2; tokens <= 8; ++tokens) {
    const auto v = verify_attention(32, 8, 128, 16, DType::bf16, k_sm90_bytes, tokens);
    ASSERT_TRUE(v) << tokens;
    EXPECT_EQ(v->query_tokens, tokens <= 2 ? 2 : tokens <= 4 ? 4 : 8);
    EXPECT_LE(v->heads_per_cta * v->query_tokens, 16);
    EXPECT_TRUE(std::ranges::binary_search(catalog.modules, v->module.key())) << v->module.key();
  }
  EXPECT_FALSE(verify_attention(32, 8, 128, 16, DType::bf16, k_sm90_bytes, 9));
  EXPECT_FALSE(verify_attention(32, 8, 96, 16, DType::bf16, k_sm90_bytes, 4));
  EXPECT_FALSE(verify_attention(16, 8, 256, 16, DType::bf16, k_sm89_bytes, 8));  // 8 columns of 256 do not fit
  EXPECT_TRUE(verify_attention(16, 8, 256, 16, DType::bf16, k_sm89_bytes, 4));
  // GQA 7:1 at 1 + 3: 7 is prime and 7 x 4 > 16, so one head an item.
  EXPECT_EQ(verify_attention(28, 4, 128, 16, DType::f8_e4m3, k_sm90_bytes, 4)->heads_per_cta, 1);
}

// Speculating adds the verify shapes (serving_verify_shapes) to the graphs, never modules.
TEST(KernelCatalog, SpeculationAddsVerifyGraphsOnly) {
  KernelNeeds needs = needs_of(bench_config("llama-3.1-8b"));
  const ServingCatalog plain = kernel_catalog(k_h200, needs);
  needs.max_verify_tokens = 8;
  needs.verify_token_capacity = 128;
  needs.verify_graph_budget = 64;
  const ServingCatalog speculating = kernel_catalog(k_h200, needs);
  EXPECT_EQ(speculating.modules, plain.modules);
  // Buckets 1-16 take widths 2-8 (16 x 8 = 128 tokens), 32 widths 2-4, 64 width 2.
  EXPECT_EQ(speculating.graphs.size(), plain.graphs.size() + 5 * 7 + 3 + 1);
}

TEST(KernelCatalog, PlatformRoundTripsThroughTheDeviceFacts) {
  DeviceInfo device;
  device.compute_major = 9;
  device.compute_minor = 0;
  device.max_shared_bytes_per_block = k_sm90_bytes;
  device.n_multiprocessors = 132;
  const KernelPlatform p = kernel_platform(device, {}, true, true);
  EXPECT_EQ(p, k_h200);
  EXPECT_EQ(p.arch(), "sm_90");
  EXPECT_EQ(platform_device(p).max_shared_bytes_per_block, k_sm90_bytes);
  EXPECT_TRUE(platform_options(p).stream_gemm);
}

}  // namespace
}  // namespace flare::helios::cuda

#endif  // FLARE_HAVE_CUDA
