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

}  // namespace
}  // namespace flare::model
