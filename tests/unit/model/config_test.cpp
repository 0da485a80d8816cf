// config.json parsing: every supported family and rope style, both config styles (top-level
// rope_theta/rope_scaling and rope_parameters), and malformed or hostile configs rejected with a
// message naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/rope.h"
#include "model/spec.h"

namespace flare::model {
namespace {

nlohmann::json base_config(const std::string& architecture = "LlamaForCausalLM") {
  return {{"architectures", {architecture}}, {"vocab_size", 256}, {"hidden_size", 128}, {"intermediate_size", 256},
          {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
          {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-5}, {"rope_theta", 500000.0}, {"hidden_act", "silu"}};
}

ModelSpec parse(const nlohmann::json& config) { return model_spec_parse(config.dump()); }

void expect_error(const nlohmann::json& config, const std::string& needle) {
  try {
    parse(config);
    ADD_FAILURE() << "accepted: " << config.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), ExitCode::preparation);
  }
}

TEST(ModelSpec, ParsesLlama) {
  const ModelSpec spec = parse(base_config());
  EXPECT_EQ(spec.head_dim, 32);
  EXPECT_EQ(spec.n_kv_heads, 2);
  EXPECT_EQ(spec.rope.theta, 500000.0);
  EXPECT_FALSE(spec.qk_norm || spec.qkv_bias || spec.o_bias);
  EXPECT_EQ(spec.layers.at(0).sliding_window, 0);
  EXPECT_FALSE(spec.tie_word_embeddings);
}

TEST(ModelSpec, FamilyFlags) {
  auto qwen3 = base_config("Qwen3ForCausalLM");
  qwen3["head_dim"] = 64;
  EXPECT_TRUE(parse(qwen3).qk_norm);
  EXPECT_EQ(parse(qwen3).head_dim, 64);
  const ModelSpec qwen2 = parse(base_config("Qwen2ForCausalLM"));
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.o_bias);
  auto mistral = base_config("MistralForCausalLM");
  mistral["sliding_window"] = 4096;
  EXPECT_EQ(parse(mistral).layers.at(1).sliding_window, 4096);
  mistral["sliding_window"] = nullptr;
  EXPECT_EQ(parse(mistral).layers.at(1).sliding_window, 0);
  auto llama = base_config();
  llama["attention_bias"] = true;
  EXPECT_TRUE(parse(llama).qkv_bias && parse(llama).o_bias);
}

TEST(ModelSpec, ReadsBothRopeStyles) {
  auto old_style = base_config();
  old_style["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                               {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  auto new_style = base_config();
  new_style.erase("rope_theta");
  new_style["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                                  {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                                  {"original_max_position_embeddings", 8192}};
  for (const auto& config : {old_style, new_style}) {
    const ModelSpec spec = parse(config);
    EXPECT_EQ(spec.rope.type, RopeType::llama3);
    EXPECT_EQ(spec.rope.theta, 500000.0);
    EXPECT_EQ(spec.rope.factor, 8.0);
    EXPECT_EQ(spec.rope.original_max_position, 8192);
  }
  auto legacy = base_config();
  legacy["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};  // older "type" key
  EXPECT_EQ(parse(legacy).rope.type, RopeType::linear);
  auto none = base_config();
  none["rope_scaling"] = nullptr;
  EXPECT_EQ(parse(none).rope.type, RopeType::default_);
}

TEST(ModelSpec, RopeFrequencies) {
  auto config = base_config();
  config["rope_theta"] = 10000.0;
  ModelSpec spec = parse(config);
  auto base = rope_frequencies(spec, 0);
  ASSERT_EQ(base.inv_freq.size(), 16u);
  EXPECT_FLOAT_EQ(base.inv_freq[0], 1.0f);
  EXPECT_NEAR(base.inv_freq[1], std::pow(10000.0, -2.0 / 32), 1e-7);
  config["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  EXPECT_FLOAT_EQ(rope_frequencies(parse(config), 0).inv_freq[1], base.inv_freq[1] / 4);
  config["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  spec = parse(config);
  EXPECT_EQ(rope_frequencies(spec, 100).inv_freq, base.inv_freq);     // within max positions: unchanged
  EXPECT_LT(rope_frequencies(spec, 2048).inv_freq[1], base.inv_freq[1]);  // beyond: larger base
  config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  const auto yarn = rope_frequencies(parse(config), 0);
  EXPECT_NEAR(yarn.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-6);
  EXPECT_FLOAT_EQ(yarn.inv_freq[0], base.inv_freq[0]);  // high frequencies extrapolate
  EXPECT_NEAR(yarn.inv_freq[15], base.inv_freq[15] / 4, 1e-9);  // low ones interpolate
}

TEST(ModelSpec, RejectsUnsupportedAndMalformed) {
  expect_error(base_config("GPT2LMHeadModel"), "architectures");
  auto c = base_config();
  c["architectures"] = nlohmann::json::array();
  expect_error(c, "architectures");
  c = base_config();
  c["architectures"] = {"LlamaForCausalLM", "Qwen3ForCausalLM"};
  expect_error(c, "architectures");
  c = base_config();
  c.erase("hidden_size");
  expect_error(c, "hidden_size");
  for (const nlohmann::json& bad : {nlohmann::json(-1), nlohmann::json(0), nlohmann::json(1.5), nlohmann::json("128"),
                                    nlohmann::json(1LL << 40)}) {
    c = base_config();
    c["num_hidden_layers"] = bad;
    expect_error(c, "num_hidden_layers");
  }
  c = base_config();
  c["num_key_value_heads"] = 3;
  expect_error(c, "num_key_value_heads");
  c = base_config();
  c["hidden_size"] = 130;
  expect_error(c, "hidden_size");
  c = base_config();
  c["hidden_act"] = "gelu";
  expect_error(c, "hidden_act");
  c = base_config();
  c["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 2.0}};
  expect_error(c, "rope_type");
  c = base_config();
  c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 0.5}};
  expect_error(c, "factor");
  c = base_config();
  c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  expect_error(c, "freq_factor");
  c = base_config();
  c["rope_scaling"] = "linear";
  expect_error(c, "rope_scaling");
  c = base_config();
  c["partial_rotary_factor"] = 0.5;
  expect_error(c, "partial_rotary_factor");
  c = base_config();
  c["mlp_bias"] = true;
  expect_error(c, "mlp_bias");
  c = base_config("Qwen3ForCausalLM");
  c["use_sliding_window"] = true;
  expect_error(c, "use_sliding_window");
  c = base_config("Qwen2ForCausalLM");
  c["layer_types"] = {"full_attention", "sliding_attention"};
  expect_error(c, "layer_types");
  c = base_config("MistralForCausalLM");
  c["sliding_window"] = -4;
  expect_error(c, "sliding_window");
  c = base_config();
  c["rms_norm_eps"] = "tiny";
  expect_error(c, "rms_norm_eps");
  c = base_config();
  c["tie_word_embeddings"] = "yes";
  expect_error(c, "tie_word_embeddings");
  c = base_config();
  c["head_dim"] = 33;
  expect_error(c, "head_dim");
}

TEST(ModelSpec, ReadsFp8QuantizationConfig) {
  EXPECT_FALSE(parse(base_config()).quantization.fp8);
  auto c = base_config();
  c["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"},
                              {"weight_block_size", {128, 64}}};
  ModelSpec spec = parse(c);
  EXPECT_TRUE(spec.quantization.fp8);
  EXPECT_EQ(spec.quantization.block_rows, 128);
  EXPECT_EQ(spec.quantization.block_cols, 64);
  c["quantization_config"] = {{"quant_method", "fp8"}};  // one scale per tensor
  spec = parse(c);
  EXPECT_TRUE(spec.quantization.fp8);
  EXPECT_EQ(spec.quantization.block_rows, 0);

  for (const char* method : {"awq", "gptq", "bitsandbytes"}) {
    c["quantization_config"] = {{"quant_method", method}};
    expect_error(c, "quant_method");
  }
  // MXFP4 is gpt-oss's expert format: a dense model with it is refused, naming the field.
  c["quantization_config"] = {{"quant_method", "mxfp4"}};
  expect_error(c, "gpt-oss experts only");
  c["quantization_config"] = {{"bits", 4}};
  expect_error(c, "quant_method");
  c["quantization_config"] = "fp8";
  expect_error(c, "quantization_config");
  c["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e5m2"}};
  expect_error(c, "fmt");
  for (const nlohmann::json& block : {nlohmann::json::array({128}), nlohmann::json::array({0, 128}),
                                      nlohmann::json::array({128, -1}), nlohmann::json::array({128, 1.5}),
                                      nlohmann::json("128x128"), nlohmann::json::array({128, 128, 1})}) {
    c["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", block}};
    expect_error(c, "weight_block_size");
  }
}

TEST(ModelSpec, ReadsCompressedTensorsFp8) {
  using Scales = WeightQuantization::Scales;
  const auto config_with = [](const nlohmann::json& weights, const nlohmann::json& extra = nlohmann::json::object()) {
    auto c = base_config();
    c["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "float-quantized"},
        {"quantization_status", "compressed"},
        {"ignore", {"lm_head"}},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights", weights},
            {"input_activations", {{"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", false}}}}}}}};
    for (const auto& [key, value] : extra.items()) c["quantization_config"][key] = value;
    return c;
  };
  const nlohmann::json channel = {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}, {"symmetric", true},
                                  {"dynamic", false}, {"group_size", nullptr}, {"block_structure", nullptr}};
  ModelSpec spec = parse(config_with(channel));
  EXPECT_TRUE(spec.quantization.fp8);
  EXPECT_EQ(spec.quantization.scales, Scales::channel);
  EXPECT_EQ(spec.quantization.scale_suffix, "_scale");
  nlohmann::json tensor = channel;
  tensor["strategy"] = "tensor";
  EXPECT_EQ(parse(config_with(tensor)).quantization.scales, Scales::tensor);
  nlohmann::json block = channel;
  block["strategy"] = "block";
  block["block_structure"] = {128, 128};
  spec = parse(config_with(block));
  EXPECT_EQ(spec.quantization.scales, Scales::block);
  EXPECT_EQ(spec.quantization.block_rows, 128);

  nlohmann::json int4 = channel;
  int4["num_bits"] = 4;
  int4["type"] = "int";
  expect_error(config_with(int4), "only 8-bit float weights");
  nlohmann::json grouped = channel;
  grouped["strategy"] = "group";
  grouped["group_size"] = 128;
  expect_error(config_with(grouped), "group_size");
  nlohmann::json unblocked = channel;
  unblocked["strategy"] = "block";
  expect_error(config_with(unblocked), "strategy");
  expect_error(config_with(channel, {{"format", "pack-quantized"}}), "format");
  expect_error(config_with(channel, {{"quantization_status", "initialized"}}), "quantization_status");
  auto two = config_with(channel);
  two["quantization_config"]["config_groups"]["group_1"] = {{"targets", {"Linear"}}, {"weights", tensor}};
  expect_error(two, "differs from the other groups");
  auto none = config_with(channel);
  none["quantization_config"]["config_groups"] = nlohmann::json::object();
  expect_error(none, "config_groups");
  auto no_weights = config_with(channel);
  no_weights["quantization_config"]["config_groups"]["group_0"].erase("weights");
  expect_error(no_weights, "weights");
}

TEST(ModelSpec, RejectsNonJson) {
  for (const char* text : {"", "{", "[]", "null", "{\"architectures\": [\"LlamaForCausalLM\"]", "\xff\xfe"}) {
    EXPECT_THROW(model_spec_parse(text), Error) << text;
  }
}

TEST(ModelSpec, ParsesTheDemoModelConfig) {
  const ModelSpec spec = model_spec_load(std::filesystem::path(FLARE_SOURCE_DIR) / "assets" / "demo-model");
  EXPECT_EQ(spec.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(spec.n_parameters(), 15736192);  // README: 15,736,192
  EXPECT_EQ(spec.rope.theta, 10000.0);
  EXPECT_TRUE(spec.tie_word_embeddings);
}

}  // namespace
}  // namespace flare::model
