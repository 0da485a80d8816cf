// model::kernel_needs: each architecture's part of the kernel catalog from its spec (one attention
// shape for full and sliding layers alike, FP8 projections for FP8 checkpoints) and the serving
// settings' part, kept distinct and ascending.
#include <algorithm>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/kernel_needs.h"
#include "model/spec.h"

namespace flare::model {
namespace {

namespace fs = std::filesystem;
using helios::AttentionNeeds;
using helios::DType;

fs::path test_model(const std::string& name) { return fs::path(FLARE_TEST_DATA) / "models" / name; }

ServingSettings serving() {
  return {.decode_buckets = {4, 1, 2, 2}, .prefill_chunk_tokens = 512, .page_size_tokens = 16,
          .kv_dtypes = {DType::f8_e4m3, DType::bf16, DType::bf16}};
}

TEST(KernelNeeds, ServingSettingsComeOutDistinctAndAscending) {
  const ModelSpec spec = model_spec_load(test_model("qwen3-gqa2-hd128-tied"));
  const helios::KernelNeeds needs = kernel_needs(spec, serving());
  EXPECT_EQ(needs.decode_buckets, (std::vector<std::int32_t>{1, 2, 4}));
  EXPECT_EQ(needs.kv_dtypes, (std::vector<DType>{DType::bf16, DType::f8_e4m3}));
  EXPECT_EQ(needs.prefill_chunk_tokens, 512);
  EXPECT_EQ(needs.page_size_tokens, 16);
  EXPECT_EQ(needs.vocab_size, spec.vocab_size);
}

TEST(KernelNeeds, EachArchitectureNamesItsAttentionShape) {
  for (const char* name : {"qwen3-gqa2-hd128-tied", "qwen2-gqa2-hd64-bias", "llama-gqa4-hd64-tied-llama3",
                           "mistral-gqa2-hd64-window8", "gemma3-gqa2-hd256-untied-window16", "gemma3-gqa2-hd64-window8"}) {
    const ModelSpec spec = model_spec_load(test_model(name));
    const helios::KernelNeeds needs = kernel_needs(spec, serving());
    EXPECT_EQ(needs.attention,
              (std::vector<AttentionNeeds>{{spec.n_heads, spec.n_kv_heads, spec.head_dim, spec.head_dim / 2}}))
        << name;
    EXPECT_FALSE(needs.fp8_linears) << name;
  }
  // Gemma 3's sliding and global layers share one shape: the window is a launch argument.
  const ModelSpec gemma = model_spec_load(test_model("gemma3-gqa2-hd256-untied-window16"));
  bool sliding = false, global = false;
  for (const LayerSpec& layer : gemma.layers) (layer.sliding_window > 0 ? sliding : global) = true;
  EXPECT_TRUE(sliding && global);
  EXPECT_EQ(kernel_needs(gemma, serving()).attention.size(), 1u);
}

TEST(KernelNeeds, Fp8CheckpointsHaveFp8Projections) {
  nlohmann::json config = nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 1000, "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "hidden_act": "silu"})");
  EXPECT_FALSE(kernel_needs(model_spec_parse(config.dump()), serving()).fp8_linears);
  config["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {128, 128}}};
  const helios::KernelNeeds needs = kernel_needs(model_spec_parse(config.dump()), serving());
  EXPECT_TRUE(needs.fp8_linears);
  EXPECT_EQ(needs.attention, (std::vector<AttentionNeeds>{{4, 2, 64, 32}}));
}

// A learned draft served beside its target adds its own attention shape (and its FP8 projections);
// a draft of the target's shape adds nothing new.
TEST(KernelNeeds, ADraftModelsShapesJoinTheTargets) {
  const ModelSpec target = model_spec_load(test_model("qwen3-gqa2-hd128-tied"));
  nlohmann::json config = nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 1000, "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "hidden_act": "silu"})");
  config["vocab_size"] = target.vocab_size;
  config["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {128, 128}}};
  const ModelSpec draft = model_spec_parse(config.dump());
  const helios::KernelNeeds alone = kernel_needs(target, serving());
  const helios::KernelNeeds both = kernel_needs(target, serving(), &draft);
  EXPECT_FALSE(alone.fp8_linears);
  EXPECT_TRUE(both.fp8_linears);
  std::vector<AttentionNeeds> expected = alone.attention;
  expected.push_back({4, 2, 64, 32});
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(both.attention, expected);
  EXPECT_EQ(kernel_needs(target, serving(), &target).attention, alone.attention);
  EXPECT_EQ(both.decode_buckets, alone.decode_buckets);
}

}  // namespace
}  // namespace flare::model
