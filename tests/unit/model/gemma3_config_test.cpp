// Gemma3ForCausalLM's config.json: layer kinds from layer_types or the older
// sliding_window_pattern, its two ropes in both config styles, the softmax scale, soft-capping, and
// what it rejects; and its weight table (norms stored as 1 + w, GeGLU, four norms a layer).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/architecture.h"
#include "model/spec.h"

namespace flare::model {
namespace {

nlohmann::json gemma_config() {
  return {{"architectures", {"Gemma3ForCausalLM"}}, {"model_type", "gemma3_text"}, {"vocab_size", 256},
          {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 6}, {"num_attention_heads", 2},
          {"num_key_value_heads", 1}, {"head_dim", 64}, {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-6},
          {"hidden_activation", "gelu_pytorch_tanh"}, {"rope_theta", 1000000.0}, {"rope_local_base_freq", 10000.0},
          {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}, {"query_pre_attn_scalar", 48},
          {"sliding_window", 8}, {"sliding_window_pattern", 6}, {"final_logit_softcapping", nullptr},
          {"attn_logit_softcapping", nullptr}, {"tie_word_embeddings", true}};
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

TEST(Gemma3Config, SlidingWindowPatternMakesEverySixthLayerGlobal) {
  const ModelSpec spec = parse(gemma_config());
  ASSERT_EQ(spec.layers.size(), 6u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(spec.layers[std::size_t(i)].sliding_window, 8) << i;
  EXPECT_EQ(spec.layers[5].sliding_window, 0);
  EXPECT_EQ(spec.activation, Activation::gelu_tanh);
  EXPECT_EQ(spec.rope.type, RopeType::linear);
  EXPECT_EQ(spec.rope.theta, 1e6);
  ASSERT_TRUE(spec.sliding_rope);
  EXPECT_EQ(spec.sliding_rope->type, RopeType::default_);
  EXPECT_EQ(spec.sliding_rope->theta, 10000.0);
  EXPECT_FLOAT_EQ(spec.softmax_scale(), 1.0f / std::sqrt(48.0f));
  EXPECT_EQ(spec.final_logit_softcap, 0.0f);
  EXPECT_TRUE(spec.qk_norm);
}

TEST(Gemma3Config, LayerTypesAndRopeParametersByLayerType) {
  nlohmann::json c = gemma_config();
  c.erase("rope_scaling");
  c.erase("rope_theta");
  c.erase("rope_local_base_freq");
  c["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention",
                      "sliding_attention", "sliding_attention", "full_attention"};
  c["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 1e6}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  c["final_logit_softcapping"] = 30.0;
  const ModelSpec spec = parse(c);
  EXPECT_EQ(spec.layers[1].sliding_window, 0);
  EXPECT_EQ(spec.layers[2].sliding_window, 8);
  EXPECT_EQ(spec.rope.type, RopeType::linear);
  EXPECT_EQ(spec.rope.factor, 2.0);
  EXPECT_EQ(spec.rope.theta, 1e6);
  EXPECT_EQ(spec.sliding_rope->theta, 10000.0);
  EXPECT_EQ(spec.final_logit_softcap, 30.0f);
}

TEST(Gemma3Config, RejectsWhatItDoesNotImplement) {
  nlohmann::json c = gemma_config();
  c["attn_logit_softcapping"] = 50.0;
  expect_error(c, "attn_logit_softcapping");
  c = gemma_config();
  c["hidden_activation"] = "silu";
  expect_error(c, "hidden_activation");
  c = gemma_config();
  c["layer_types"] = {"sliding_attention", "full_attention"};
  expect_error(c, "layer_types");
  c = gemma_config();
  c["layer_types"] = {"sliding_attention", "linear_attention", "full_attention", "full_attention",
                      "full_attention", "full_attention"};
  expect_error(c, "layer_types");
  c = gemma_config();
  c["query_pre_attn_scalar"] = -4;
  expect_error(c, "query_pre_attn_scalar");
  c = gemma_config();
  c["use_bidirectional_attention"] = true;
  expect_error(c, "use_bidirectional_attention");
  // A dense family refuses GeGLU rather than running it as SwiGLU.
  c = gemma_config();
  c["architectures"] = {"LlamaForCausalLM"};
  expect_error(c, "hidden_act");
}

TEST(Gemma3Config, WeightTableStoresNormsPlusOne) {
  const ModelSpec spec = parse(gemma_config());
  const WeightTable table = architecture_of(spec).weight_table(spec);
  ASSERT_EQ(table.groups.size(), 7u);
  EXPECT_EQ(table.aliases.at("lm_head"), "embed");
  for (const char* name : {"final_norm", "layers.0.input_norm", "layers.0.q_norm", "layers.0.k_norm",
                           "layers.0.post_attention_norm", "layers.0.pre_ff_norm", "layers.0.post_ff_norm"}) {
    const WeightEntry* entry = table.find(name);
    ASSERT_NE(entry, nullptr) << name;
    EXPECT_EQ(entry->transform, WeightTransform::plus_one) << name;
  }
  const WeightEntry* qkv = table.find("layers.3.qkv");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->rows(), 2 * 64 + 2 * 64);
  EXPECT_EQ(qkv->sources.at(0).name, "model.layers.3.self_attn.q_proj.weight");
  // embed + final norm + 6 x (qkv, o, gate_up, down, 2 head norms, 4 norms)
  const std::int64_t layer = 64 * 256 + 64 * 128 + 64 * 256 + 128 * 64 + 2 * 64 + 4 * 64;
  EXPECT_EQ(spec.n_parameters(), 256 * 64 + 64 + 6 * layer);
  // History: the global layers' group first, then the sliding layers', which keep their window.
  const auto history = architecture_of(spec).history(spec);
  const auto groups = helios::history_groups(history);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].window(), 0);
  EXPECT_EQ(groups[1].window(), 8);
  EXPECT_EQ(groups[0].layers.size() + groups[1].layers.size(), 6u);
  EXPECT_EQ(std::get<helios::PagedKvSpec>(history[0]).sliding_window, 8);
}

}  // namespace
}  // namespace flare::model
