// The embedded benchmark shapes parse into the published architectures, resolve by name, recipe
// alias, config.json file or checkpoint directory; model costs match hand counts for Llama-3.1-8B.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "bench/bench_steps.h"
#include "bench/model_costs.h"
#include "bench/shape_configs.h"
#include "common/error.h"

namespace flare::bench {
namespace {

namespace fs = std::filesystem;

TEST(ShapeConfigs, EmbedsTheDenseAndMixtureOfExpertsShapes) {
  std::vector<std::string> names;
  for (const ShapeConfig& s : embedded_shape_configs()) names.emplace_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"gemma-3-12b", "gpt-oss-20b", "llama-3.1-8b", "mixtral-8x7b",
                                            "qwen3-30b-a3b-fp8", "qwen3-30b-a3b", "qwen3-8b"}));
}

// qwen3-30b-a3b-fp8: Qwen3-30B-A3B's shape with its FP8 checkpoint's quantization; FP8 experts
// count a byte a value and an f32 scale per 128 x 128 block in the bound, as the dense matrices do.
TEST(ShapeConfigs, Qwen3MoeFp8ShapeReadsItsFp8Experts) {
  const BenchModel m = bench_model_resolve("qwen3-30b-a3b-fp8");
  const model::ModelSpec& s = m.spec;
  EXPECT_EQ(s.architecture, "Qwen3MoeForCausalLM");
  EXPECT_TRUE(s.quantization.fp8);
  EXPECT_EQ(s.quantization.block_rows, 128);
  EXPECT_EQ(s.quantization.block_cols, 128);
  EXPECT_EQ(s.moe.n_experts, 128);
  EXPECT_EQ(s.moe.top_k, 8);
  // Per layer: qkv 5120x2048 and o 2048x4096 in FP8, the router 128x2048 in BF16 (as the checkpoint
  // leaves it), 8 experts of gate_up 1536x2048 and down 2048x768 in FP8; f32 norms (2 x 2048) and
  // q/k norms (2 x 128). Then the final norm and the 151936x2048 head (BF16).
  const double per_fp8 = 1.0 + 4.0 / (128 * 128);
  const double layer = per_fp8 * (5120.0 * 2048 + 2048.0 * 4096) + 2.0 * 128 * 2048 +
                       8 * per_fp8 * (1536.0 * 2048 + 2048.0 * 768) + 4.0 * (2 * 2048 + 2 * 128);
  EXPECT_DOUBLE_EQ(decode_weight_bytes(s, helios::DType::f8_e4m3), 48 * layer + 2048 * 4 + 151936.0 * 2048 * 2);
  // The BF16 shape's experts read twice the bytes.
  const double bf16_layer = 2.0 * (5120.0 * 2048 + 2048.0 * 4096 + 128.0 * 2048) +
                            8 * 2.0 * (1536.0 * 2048 + 2048.0 * 768) + 4.0 * (2 * 2048 + 2 * 128);
  EXPECT_DOUBLE_EQ(decode_weight_bytes(bench_model_resolve("qwen3-30b-a3b").spec),
                   48 * bf16_layer + 2048 * 4 + 151936.0 * 2048 * 2);
}

TEST(ShapeConfigs, MixtureOfExpertsShapesCountActiveParameters) {
  const BenchModel qwen = bench_model_resolve("qwen3-30b-a3b");
  EXPECT_EQ(qwen.spec.architecture, "Qwen3MoeForCausalLM");
  EXPECT_EQ(qwen.spec.moe.n_experts, 128);
  EXPECT_EQ(qwen.spec.moe.top_k, 8);
  EXPECT_NEAR(double(qwen.spec.n_parameters()) / 1e9, 30.5, 0.1);
  EXPECT_NEAR(double(qwen.spec.n_active_parameters()) / 1e9, 3.3, 0.1);
  const BenchModel mixtral = bench_model_resolve("mixtral-8x7b");
  EXPECT_EQ(mixtral.spec.architecture, "MixtralForCausalLM");
  EXPECT_NEAR(double(mixtral.spec.n_parameters()) / 1e9, 46.7, 0.1);
  EXPECT_NEAR(double(mixtral.spec.n_active_parameters()) / 1e9, 12.9, 0.1);
}

// gpt-oss-20b: MXFP4 experts count half a byte a value and a scale byte per 32 in the bound.
TEST(ShapeConfigs, GptOss20bShapeReadsItsMxfp4Experts) {
  const BenchModel m = bench_model_resolve("gpt-oss-20b");
  const model::ModelSpec& s = m.spec;
  EXPECT_EQ(s.architecture, "GptOssForCausalLM");
  EXPECT_EQ(s.n_layers, 24);
  EXPECT_EQ(s.moe.n_experts, 32);
  EXPECT_EQ(s.moe.top_k, 4);
  EXPECT_EQ(s.layers[0].sliding_window, 128);
  EXPECT_EQ(s.layers[1].sliding_window, 0);
  EXPECT_NEAR(double(s.n_parameters()) / 1e9, 20.9, 0.1);
  // The published 3.6B active leaves out the 0.58B embedding table, which n_active_parameters counts.
  EXPECT_NEAR(double(s.n_active_parameters() - 201088ll * 2880) / 1e9, 3.6, 0.05);
  // Per layer: qkv 5120x2880, o 2880x4096 and the router 32x2880 in bf16; 4 experts of gate_up
  // 5760x2880 and down 2880x2880 in MXFP4 (0.5 + 1/32 bytes a value) with their f32 biases; f32
  // norms (2 x 2880), q/k/v/o biases (5120 + 2880), sinks (64), router bias (32). Then the final
  // norm and the 201088x2880 head.
  const double layer = 2.0 * (5120.0 * 2880 + 2880.0 * 4096 + 32.0 * 2880) +
                       4 * (5760.0 * 2880 + 2880.0 * 2880) * (0.5 + 1.0 / 32) + 4 * 4.0 * (5760 + 2880) +
                       4.0 * (2 * 2880 + 5120 + 2880 + 64 + 32);
  EXPECT_DOUBLE_EQ(decode_weight_bytes(s), 24 * layer + 2880 * 4 + 201088.0 * 2880 * 2);
  EXPECT_NEAR(decode_weight_bytes(s) / 1e9, 3.71, 0.01);
}

TEST(ShapeConfigs, Gemma3ShapeReadsOnlyTheWindowOnSlidingLayers) {
  const BenchModel m = bench_model_resolve("gemma-3-12b");
  const model::ModelSpec& s = m.spec;
  EXPECT_EQ(s.architecture, "Gemma3ForCausalLM");
  EXPECT_EQ(s.n_layers, 48);
  EXPECT_EQ(s.head_dim, 256);
  std::int32_t n_sliding = 0;
  for (const auto& layer : s.layers) n_sliding += layer.sliding_window == 1024 ? 1 : 0;
  EXPECT_EQ(n_sliding, 40);
  // K and V of 8 heads x 256 BF16 per position: 8 KiB.
  EXPECT_EQ(kv_bytes_read(s, 0, 4096, helios::DType::bf16), 1024.0 * 8192);  // layer 0 slides
  EXPECT_EQ(kv_bytes_read(s, 5, 4096, helios::DType::bf16), 4096.0 * 8192);  // layer 5 is global
  EXPECT_EQ(kv_bytes_per_token(s, helios::DType::bf16), 48.0 * 8192);
}

TEST(ShapeConfigs, LlamaShapeIsTheLlama31Architecture) {
  const BenchModel m = bench_model_resolve("llama-3.1-8b");
  const model::ModelSpec& s = m.spec;
  EXPECT_TRUE(bench_model_random_weights(m));
  EXPECT_EQ(s.architecture, "LlamaForCausalLM");
  EXPECT_EQ(s.hidden_size, 4096);
  EXPECT_EQ(s.n_layers, 32);
  EXPECT_EQ(s.n_heads, 32);
  EXPECT_EQ(s.n_kv_heads, 8);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.intermediate_size, 14336);
  EXPECT_EQ(s.vocab_size, 128256);
  EXPECT_FALSE(s.tie_word_embeddings);
  EXPECT_FALSE(s.qk_norm);
  EXPECT_EQ(s.rope.type, model::RopeType::llama3);
  EXPECT_DOUBLE_EQ(s.rope.theta, 500000.0);
  EXPECT_DOUBLE_EQ(s.rope.factor, 8.0);
  EXPECT_EQ(s.rope.original_max_position, 8192);
  EXPECT_FLOAT_EQ(s.rms_norm_eps, 1e-5f);
  EXPECT_EQ(s.n_parameters(), 8030261248);  // the published 8.03B
  EXPECT_EQ(m.page_size_tokens, 16);
  EXPECT_NE(m.source.find("random weights"), std::string::npos);
}

TEST(ShapeConfigs, Qwen3ShapeIsTheQwen3Architecture) {
  const BenchModel m = bench_model_resolve("Qwen3-8B");  // names are case-insensitive
  const model::ModelSpec& s = m.spec;
  EXPECT_EQ(s.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(s.hidden_size, 4096);
  EXPECT_EQ(s.n_layers, 36);
  EXPECT_EQ(s.n_heads, 32);
  EXPECT_EQ(s.n_kv_heads, 8);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.intermediate_size, 12288);
  EXPECT_EQ(s.vocab_size, 151936);
  EXPECT_FALSE(s.tie_word_embeddings);
  EXPECT_TRUE(s.qk_norm);
  EXPECT_DOUBLE_EQ(s.rope.theta, 1000000.0);
  EXPECT_EQ(s.n_parameters(), 8190735360);  // the published 8.19B
}

TEST(ShapeConfigs, RecipeAliasesFindTheirShape) {
  EXPECT_EQ(bench_model_resolve("llama-3.1-8b-instruct").name, "llama-3.1-8b");
  const model::Recipe* llama = model::find_recipe_by_alias("llama-3.1-8b-instruct");
  ASSERT_NE(llama, nullptr);
  ASSERT_NE(find_shape_config(*llama), nullptr);
  EXPECT_EQ(find_shape_config(*llama)->name, "llama-3.1-8b");
  const model::Recipe* mistral = model::find_recipe_by_alias("mistral-7b");
  ASSERT_NE(mistral, nullptr);
  EXPECT_EQ(find_shape_config(*mistral), nullptr);
  EXPECT_EQ(find_shape_config("no-such-shape"), nullptr);
}

TEST(ShapeConfigs, PathsResolveToRandomWeightsOrTheCheckpoint) {
  const fs::path dir = fs::temp_directory_path() / ("flare-bench-shape-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const ShapeConfig* qwen = find_shape_config("qwen3-8b");
  ASSERT_NE(qwen, nullptr);
  std::ofstream(dir / "config.json") << qwen->config_json;

  const BenchModel from_file = bench_model_resolve((dir / "config.json").string());
  EXPECT_TRUE(bench_model_random_weights(from_file));
  EXPECT_EQ(from_file.spec.n_layers, 36);
  const BenchModel from_dir = bench_model_resolve(dir.string());
  EXPECT_TRUE(bench_model_random_weights(from_dir));
  EXPECT_EQ(from_dir.name, dir.filename().string());

  std::ofstream(dir / "model.safetensors") << "";  // a checkpoint directory: its weights are loaded
  const BenchModel checkpoint = bench_model_resolve(dir.string());
  EXPECT_FALSE(bench_model_random_weights(checkpoint));
  EXPECT_EQ(checkpoint.checkpoint_dir, fs::absolute(dir));
  EXPECT_NE(checkpoint.source.find("checkpoint"), std::string::npos);
  fs::remove_all(dir);

  try {
    bench_model_resolve("no-such-shape");
    FAIL() << "an unknown shape resolved";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    EXPECT_NE(std::string(e.what()).find("llama-3.1-8b, mixtral-8x7b, qwen3-30b-a3b-fp8, qwen3-30b-a3b, qwen3-8b"), std::string::npos) << e.what();
  }
}

TEST(ModelCosts, Llama31EightBHandCounts) {
  const model::ModelSpec s = bench_model_resolve("llama-3.1-8b").spec;
  // Per layer: qkv 6144x4096 + o 4096x4096 + gate_up 28672x4096 + down 4096x14336 = 218,103,808
  // parameters (bf16) and two 4096-wide f32 norms; plus the final norm and the 128256x4096 head.
  const double layer = 218103808.0 * 2 + 2 * 4096 * 4;
  EXPECT_DOUBLE_EQ(decode_weight_bytes(s), 32 * layer + 4096 * 4 + 128256.0 * 4096 * 2);
  EXPECT_NEAR(decode_weight_bytes(s) / 1e9, 15.01, 0.01);
  // FP8 matrices: a byte per weight plus an f32 per 128 x 128 block; the head stays BF16.
  const double fp8_layer = 218103808.0 * (1 + 4.0 / 16384) + 2 * 4096 * 4;
  EXPECT_DOUBLE_EQ(decode_weight_bytes(s, helios::DType::f8_e4m3), 32 * fp8_layer + 4096 * 4 + 128256.0 * 4096 * 2);
  EXPECT_NEAR(decode_weight_bytes(s, helios::DType::f8_e4m3) / 1e9, 8.03, 0.01);
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(s, helios::DType::bf16), 2.0 * 1024 * 2 * 32);  // 128 KiB
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(s, helios::DType::f8_e4m3), 2.0 * 1024 * 1 * 32);
  const double n = 2048;
  const double expected = 2 * 218103808.0 * n * 32 + 4.0 * 32 * 128 * (n * (n + 1) / 2) * 32 + 2.0 * 4096 * 128256;
  EXPECT_DOUBLE_EQ(prefill_flops(s, 2048, 1), expected);
}

TEST(BenchSteps, RowsOwnTheirPagesAndAttendTheirContext) {
  const StepShape decode{3, 1, 1024, 16};
  EXPECT_EQ(decode.blocks_per_row(), 65);  // positions 0..1024
  EXPECT_EQ(decode.n_pages(), 195);
  const helios::Step step = uniform_step(decode, 1000, 5);
  ASSERT_EQ(step.n_rows(), 3);
  EXPECT_EQ(step.n_tokens(), 3);
  EXPECT_EQ(step.n_logit_rows(), 3);
  EXPECT_NO_THROW(helios::step_validate(step, decode.n_pages(), 16));
  for (std::int32_t r = 0; r < 3; ++r) {
    const helios::StepRow& row = step.rows[std::size_t(r)];
    EXPECT_EQ(row.start_position, 1024);
    EXPECT_EQ(row.first_block, r * 65);
    EXPECT_EQ(step.block_tables[std::size_t(row.first_block)], r * 65);
    EXPECT_EQ(step.block_tables[std::size_t(row.first_block + 64)], r * 65 + 64);
  }
  for (const std::int32_t token : step.tokens) EXPECT_TRUE(token >= 0 && token < 1000);
  EXPECT_EQ(uniform_step(decode, 1000, 5).tokens, step.tokens);  // seeded

  const StepShape prefill{1, 2048, 0, 16};
  EXPECT_EQ(prefill.blocks_per_row(), 128);
  const helios::Step p = uniform_step(prefill, 50, 1);
  EXPECT_EQ(p.n_tokens(), 2048);
  EXPECT_EQ(p.n_logit_rows(), 1);
  EXPECT_NO_THROW(helios::step_validate(p, prefill.n_pages(), 16));
  EXPECT_THROW(uniform_step({0, 1, 0, 16}, 10, 1), Error);
}

}  // namespace
}  // namespace flare::bench
