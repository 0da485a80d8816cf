// Qwen3MoeForCausalLM's and MixtralForCausalLM's config.json: which layers are expert layers
// (decoder_sparse_step, mlp_only_layers), the router settings, what they reject; their weight tables
// (expert stacks, the router, dense layers beside expert layers) and total/active parameter counts at
// the published shapes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/architecture.h"
#include "model/spec.h"

namespace flare::model {
namespace {

nlohmann::json qwen3_moe_config() {
  return {{"architectures", {"Qwen3MoeForCausalLM"}}, {"model_type", "qwen3_moe"}, {"vocab_size", 256},
          {"hidden_size", 64}, {"intermediate_size", 128}, {"moe_intermediate_size", 32}, {"num_experts", 8},
          {"num_experts_per_tok", 2}, {"norm_topk_prob", true}, {"decoder_sparse_step", 1},
          {"mlp_only_layers", nlohmann::json::array()}, {"num_hidden_layers", 4}, {"num_attention_heads", 2},
          {"num_key_value_heads", 1}, {"head_dim", 32}, {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-6},
          {"hidden_act", "silu"}, {"rope_theta", 1000000.0}, {"tie_word_embeddings", false}};
}

nlohmann::json mixtral_config() {
  return {{"architectures", {"MixtralForCausalLM"}}, {"model_type", "mixtral"}, {"vocab_size", 256},
          {"hidden_size", 64}, {"intermediate_size", 96}, {"num_local_experts", 4}, {"num_experts_per_tok", 2},
          {"num_hidden_layers", 2}, {"num_attention_heads", 2}, {"num_key_value_heads", 1},
          {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-5}, {"hidden_act", "silu"},
          {"rope_theta", 1000000.0}, {"sliding_window", nullptr}, {"tie_word_embeddings", false}};
}

ModelSpec parse(const nlohmann::json& config) { return model_spec_parse(config.dump()); }

void expect_error(const nlohmann::json& config, const std::string& needle) {
  try {
    parse(config);
    ADD_FAILURE() << "accepted: " << config.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::vector<bool> expert_layers(const ModelSpec& spec) {
  std::vector<bool> out;
  for (const LayerSpec& layer : spec.layers) out.push_back(layer.experts);
  return out;
}

TEST(Qwen3MoeConfig, EveryLayerHasExpertsByDefault) {
  const ModelSpec spec = parse(qwen3_moe_config());
  EXPECT_EQ(spec.moe.n_experts, 8);
  EXPECT_EQ(spec.moe.top_k, 2);
  EXPECT_EQ(spec.moe.expert_intermediate_size, 32);
  EXPECT_TRUE(spec.moe.renormalize);
  EXPECT_TRUE(spec.qk_norm);
  EXPECT_EQ(expert_layers(spec), (std::vector<bool>{true, true, true, true}));
}

TEST(Qwen3MoeConfig, SparseStepAndMlpOnlyLayersKeepDenseLayers) {
  nlohmann::json c = qwen3_moe_config();
  c["decoder_sparse_step"] = 2;
  c["mlp_only_layers"] = {3};
  c["norm_topk_prob"] = false;
  const ModelSpec spec = parse(c);
  EXPECT_EQ(expert_layers(spec), (std::vector<bool>{false, true, false, false}));
  EXPECT_FALSE(spec.moe.renormalize);
}

TEST(Qwen3MoeConfig, TransformersFiveNamesTheExpertCountNumLocalExperts) {
  nlohmann::json c = qwen3_moe_config();
  c.erase("num_experts");
  c["num_local_experts"] = 16;
  EXPECT_EQ(parse(c).moe.n_experts, 16);
  c.erase("norm_topk_prob");  // transformers' default
  EXPECT_FALSE(parse(c).moe.renormalize);
}

TEST(Qwen3MoeConfig, RejectsWhatItDoesNotImplement) {
  nlohmann::json c = qwen3_moe_config();
  c["num_experts_per_tok"] = 9;
  expect_error(c, "num_experts_per_tok");
  c = qwen3_moe_config();
  c["mlp_only_layers"] = {4};
  expect_error(c, "mlp_only_layers");
  c["mlp_only_layers"] = "all";
  expect_error(c, "mlp_only_layers");
  c = qwen3_moe_config();
  c["shared_expert_intermediate_size"] = 64;
  expect_error(c, "shared experts");
  c = qwen3_moe_config();
  c["use_sliding_window"] = true;
  expect_error(c, "use_sliding_window");
  c = qwen3_moe_config();
  c.erase("moe_intermediate_size");
  expect_error(c, "moe_intermediate_size");
  c = qwen3_moe_config();
  c["hidden_act"] = "gelu_pytorch_tanh";
  expect_error(c, "SwiGLU");
}

TEST(Qwen3MoeConfig, WeightTableStacksExpertsAndKeepsTheRouterBf16) {
  nlohmann::json c = qwen3_moe_config();
  c["mlp_only_layers"] = {1};
  const ModelSpec spec = parse(c);
  const WeightTable table = architecture_of(spec).weight_table(spec);
  const WeightEntry* gate_up = table.find("layers.0.experts.gate_up");
  ASSERT_NE(gate_up, nullptr);
  EXPECT_EQ(gate_up->n_batch, 8);
  EXPECT_EQ(gate_up->rows(), 8 * 2 * 32);
  EXPECT_EQ(gate_up->cols, 64);
  ASSERT_EQ(gate_up->sources.size(), 16u);
  EXPECT_EQ(gate_up->sources[0].name, "model.layers.0.mlp.experts.0.gate_proj.weight");
  EXPECT_EQ(gate_up->sources[1].name, "model.layers.0.mlp.experts.0.up_proj.weight");
  EXPECT_EQ(gate_up->sources[15].name, "model.layers.0.mlp.experts.7.up_proj.weight");
  const WeightEntry* down = table.find("layers.0.experts.down");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->n_batch, 8);
  EXPECT_EQ(down->rows(), 8 * 64);
  EXPECT_EQ(down->cols, 32);
  const WeightEntry* router = table.find("layers.0.router");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->sources.at(0).name, "model.layers.0.mlp.gate.weight");
  EXPECT_EQ(router->rows(), 8);
  // Layer 1 is dense: its MLP is the usual gate_up/down of intermediate_size.
  EXPECT_EQ(table.find("layers.1.experts.gate_up"), nullptr);
  ASSERT_NE(table.find("layers.1.gate_up"), nullptr);
  EXPECT_EQ(table.find("layers.1.gate_up")->rows(), 2 * 128);
}

TEST(Qwen3MoeConfig, ActiveParametersCountTopKExperts) {
  const ModelSpec spec = parse(qwen3_moe_config());
  const std::int64_t expert = 3 * 32 * 64;  // gate, up and down of one expert
  EXPECT_EQ(spec.n_parameters() - spec.n_active_parameters(), 4 * (8 - 2) * expert);
}

// The published Qwen3-30B-A3B shape: 30.5B parameters, 3.3B active.
TEST(Qwen3MoeConfig, Qwen3_30B_A3BShapeHasItsPublishedParameterCounts) {
  nlohmann::json c = qwen3_moe_config();
  c["vocab_size"] = 151936;
  c["hidden_size"] = 2048;
  c["intermediate_size"] = 6144;
  c["moe_intermediate_size"] = 768;
  c["num_experts"] = 128;
  c["num_experts_per_tok"] = 8;
  c["num_hidden_layers"] = 48;
  c["num_attention_heads"] = 32;
  c["num_key_value_heads"] = 4;
  c["head_dim"] = 128;
  const ModelSpec spec = parse(c);
  EXPECT_NEAR(double(spec.n_parameters()) / 1e9, 30.5, 0.1);
  EXPECT_NEAR(double(spec.n_active_parameters()) / 1e9, 3.3, 0.1);
}

TEST(MixtralConfig, EveryLayerHasExpertsAndTheWindowWhereSet) {
  ModelSpec spec = parse(mixtral_config());
  EXPECT_EQ(spec.moe.n_experts, 4);
  EXPECT_EQ(spec.moe.top_k, 2);
  EXPECT_EQ(spec.moe.expert_intermediate_size, 96);
  EXPECT_TRUE(spec.moe.renormalize);
  EXPECT_FALSE(spec.qk_norm);
  EXPECT_EQ(expert_layers(spec), (std::vector<bool>{true, true}));
  EXPECT_EQ(spec.layers[0].sliding_window, 0);
  nlohmann::json c = mixtral_config();
  c["sliding_window"] = 4096;
  spec = parse(c);
  EXPECT_EQ(spec.layers[1].sliding_window, 4096);
  const WeightTable table = architecture_of(spec).weight_table(spec);
  ASSERT_NE(table.find("layers.1.experts.gate_up"), nullptr);
  EXPECT_EQ(table.find("layers.1.experts.gate_up")->sources[1].name, "model.layers.1.block_sparse_moe.experts.0.w3.weight");
  EXPECT_EQ(table.find("layers.1.experts.down")->sources[3].name, "model.layers.1.block_sparse_moe.experts.3.w2.weight");
  EXPECT_EQ(table.find("layers.1.router")->sources[0].name, "model.layers.1.block_sparse_moe.gate.weight");
}

// The published Mixtral-8x7B shape: 46.7B parameters, 12.9B active.
TEST(MixtralConfig, Mixtral8x7BShapeHasItsPublishedParameterCounts) {
  nlohmann::json c = mixtral_config();
  c["vocab_size"] = 32000;
  c["hidden_size"] = 4096;
  c["intermediate_size"] = 14336;
  c["num_local_experts"] = 8;
  c["num_hidden_layers"] = 32;
  c["num_attention_heads"] = 32;
  c["num_key_value_heads"] = 8;
  const ModelSpec spec = parse(c);
  EXPECT_NEAR(double(spec.n_parameters()) / 1e9, 46.7, 0.1);
  EXPECT_NEAR(double(spec.n_active_parameters()) / 1e9, 12.9, 0.1);
}

TEST(MixtralConfig, RejectsTopKAboveTheExperts) {
  nlohmann::json c = mixtral_config();
  c["num_experts_per_tok"] = 5;
  expect_error(c, "num_experts_per_tok");
  c = mixtral_config();
  c["num_local_experts"] = 0;
  expect_error(c, "num_local_experts");
}


nlohmann::json gpt_oss_config() {
  nlohmann::json layer_types = nlohmann::json::array();
  for (int i = 0; i < 24; ++i) layer_types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
  return {{"architectures", {"GptOssForCausalLM"}}, {"model_type", "gpt_oss"}, {"vocab_size", 201088},
          {"hidden_size", 2880}, {"intermediate_size", 2880}, {"num_local_experts", 32}, {"num_experts_per_tok", 4},
          {"num_hidden_layers", 24}, {"num_attention_heads", 64}, {"num_key_value_heads", 8}, {"head_dim", 64},
          {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-5}, {"hidden_act", "silu"},
          {"attention_bias", true}, {"sliding_window", 128}, {"layer_types", layer_types}, {"swiglu_limit", 7.0},
          {"rope_theta", 150000},
          {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 32.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
                            {"truncate", false}, {"original_max_position_embeddings", 4096}}},
          {"quantization_config", {{"quant_method", "mxfp4"}}}, {"tie_word_embeddings", false}};
}

// gpt-oss-20b's published shape: 20.9B parameters, 3.6B active (OpenAI counts active parameters
// without the embedding table, which n_active_parameters includes, as Qwen's 3.3B for 30B-A3B does).
TEST(GptOssConfig, Gpt20BShapeHasItsPublishedParameterCountsAndAlternatingWindows) {
  const ModelSpec spec = parse(gpt_oss_config());
  EXPECT_NEAR(double(spec.n_parameters()) / 1e9, 20.9, 0.1);
  EXPECT_NEAR(double(spec.n_active_parameters() - 201088LL * 2880) / 1e9, 3.6, 0.1);
  EXPECT_EQ(spec.layers[0].sliding_window, 128);
  EXPECT_EQ(spec.layers[1].sliding_window, 0);
  EXPECT_TRUE(spec.qkv_bias && spec.o_bias);
  EXPECT_EQ(spec.moe.swiglu_limit, 7.0f);
  EXPECT_TRUE(spec.moe.renormalize);
  EXPECT_EQ(spec.rope.type, RopeType::yarn);
  EXPECT_FALSE(spec.rope.truncate);
  const WeightTable table = architecture_of(spec).weight_table(spec);
  const WeightEntry* gate_up = table.find("layers.3.experts.gate_up");
  ASSERT_NE(gate_up, nullptr);
  EXPECT_TRUE(gate_up->mxfp4);
  EXPECT_EQ(gate_up->transform, WeightTransform::deinterleave_rows);
  EXPECT_EQ(gate_up->sources.at(0).name, "model.layers.3.mlp.experts.gate_up_proj");
  EXPECT_EQ(gate_up->rows(), 32 * 2 * 2880);
  ASSERT_NE(table.find("layers.3.sinks"), nullptr);
  ASSERT_NE(table.find("layers.3.router_bias"), nullptr);
  EXPECT_EQ(table.find("layers.3.experts.down_bias")->n_batch, 32);
  // MXFP4 stacks are 4.25 bits a weight in the package.
  EXPECT_LT(double(table.prepared_bytes()) / 1e9, 14.0);
}

TEST(GptOssConfig, RejectsBf16ExpertsAndMxfp4Elsewhere) {
  nlohmann::json c = gpt_oss_config();
  c.erase("quantization_config");
  expect_error(c, "MXFP4 experts");
  c = gpt_oss_config();
  c["num_experts_per_tok"] = 33;
  expect_error(c, "num_experts_per_tok");
  c = gpt_oss_config();
  c["layer_types"] = {"sliding_attention"};
  expect_error(c, "layer_types");
  nlohmann::json q = qwen3_moe_config();
  q["quantization_config"] = {{"quant_method", "mxfp4"}};
  expect_error(q, "gpt-oss experts only");
}

TEST(GptOssConfig, WithoutLayerTypesEvenLayersSlide) {
  nlohmann::json c = gpt_oss_config();
  c.erase("layer_types");
  c.erase("num_experts_per_tok");
  c["experts_per_token"] = 4;  // the reference implementation's name
  const ModelSpec spec = parse(c);
  EXPECT_EQ(spec.moe.top_k, 4);
  EXPECT_EQ(spec.layers[2].sliding_window, 128);
  EXPECT_EQ(spec.layers[3].sliding_window, 0);
}
}  // namespace
}  // namespace flare::model
