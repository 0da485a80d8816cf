// config.json -> ModelSpec (see spec.h): the fields every architecture shares, the rope settings in
// both styles found in the wild (top-level rope_theta / rope_scaling, and transformers 5's
// rope_parameters), then the architecture's own fields through the registry (architecture.h).
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/architecture.h"
#include "model/architectures/config_context.h"
#include "model/spec.h"

namespace flare::model {

bool ConfigContext::has(std::string_view key) const {
  auto it = json.find(key);
  return it != json.end() && !it->is_null();
}

void ConfigContext::reject(std::string_view key, std::string_view why) const {
  fail(ExitCode::preparation, "{}: field `{}`: {}", origin, key, why);
}

bool ConfigContext::get_bool(std::string_view key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& value = json.at(std::string(key));
  if (!value.is_boolean()) reject(key, "must be true or false");
  return value.get<bool>();
}

std::int32_t ConfigContext::get_positive_int(std::string_view key) const {
  if (!has(key)) reject(key, "is required");
  const auto& value = json.at(std::string(key));
  if (!value.is_number_integer() || value.get<std::int64_t>() < 1 || value.get<std::int64_t>() > (1 << 30)) {
    reject(key, fmt::format("must be a positive integer, got {}", value.dump()));
  }
  return std::int32_t(value.get<std::int64_t>());
}

std::int32_t ConfigContext::get_positive_int(std::string_view key, std::int32_t fallback) const {
  return has(key) ? get_positive_int(key) : fallback;
}

double ConfigContext::get_number(std::string_view key, double fallback) const {
  if (!has(key)) return fallback;
  const auto& value = json.at(std::string(key));
  if (!value.is_number() || !std::isfinite(value.get<double>())) reject(key, "must be a finite number");
  return value.get<double>();
}

void require_full_attention_layers(const ConfigContext& config, std::string_view also) {
  if (!config.has("layer_types")) return;
  const auto& types = config.json.at("layer_types");
  if (!types.is_array()) config.reject("layer_types", "must be a list");
  for (const auto& type : types) {
    if (!type.is_string() || (type != "full_attention" && (also.empty() || type != std::string(also)))) {
      config.reject("layer_types", fmt::format("layer type {} is not supported", type.dump()));
    }
  }
}

namespace {

RopeType rope_type_parse(const ConfigContext& rope, std::string_view key) {
  const auto& value = rope.json.at(std::string(key));
  if (!value.is_string()) rope.reject(key, "must be a string");
  const std::string name = value.get<std::string>();
  if (name == "default") return RopeType::default_;
  if (name == "linear") return RopeType::linear;
  if (name == "dynamic") return RopeType::dynamic;
  if (name == "yarn") return RopeType::yarn;
  if (name == "llama3") return RopeType::llama3;
  rope.reject(key, fmt::format("rope type \"{}\" is not supported (default, linear, dynamic, yarn, llama3)", name));
}

}  // namespace

void rope_parse(const nlohmann::json& dict, const std::string& origin, RopeSpec& rope) {
  if (!dict.is_object()) fail(ExitCode::preparation, "{}: must be an object", origin);
  const ConfigContext r{dict, origin};
  if (r.has("rope_theta")) rope.theta = r.get_number("rope_theta", rope.theta);
  if (r.has("rope_type")) {
    rope.type = rope_type_parse(r, "rope_type");
  } else if (r.has("type")) {
    rope.type = rope_type_parse(r, "type");
  }
  if (rope.type == RopeType::default_) return;
  rope.factor = r.get_number("factor", 0.0);
  if (!(rope.factor >= 1.0)) r.reject("factor", "must be a number >= 1");
  rope.original_max_position = r.get_positive_int("original_max_position_embeddings", 0);
  if (rope.type == RopeType::llama3) {
    rope.low_freq_factor = r.get_number("low_freq_factor", 0.0);
    rope.high_freq_factor = r.get_number("high_freq_factor", 0.0);
    if (!(rope.low_freq_factor > 0 && rope.high_freq_factor > rope.low_freq_factor)) {
      r.reject("high_freq_factor", "llama3 rope needs 0 < low_freq_factor < high_freq_factor");
    }
    if (rope.original_max_position == 0) r.reject("original_max_position_embeddings", "is required for llama3 rope");
  }
  if (rope.type == RopeType::yarn) {
    rope.beta_fast = r.get_number("beta_fast", 32.0);
    rope.beta_slow = r.get_number("beta_slow", 1.0);
    if (r.has("attention_factor")) rope.attention_factor = r.get_number("attention_factor", 1.0);
    if (r.has("mscale")) rope.mscale = r.get_number("mscale", 1.0);
    if (r.has("mscale_all_dim")) rope.mscale_all_dim = r.get_number("mscale_all_dim", 1.0);
    rope.truncate = r.get_bool("truncate", true);
  }
}

namespace {

void rope_parse_config(const ConfigContext& c, RopeSpec& rope) {
  rope.theta = c.get_number("rope_theta", 10000.0);
  if (c.has("rope_parameters") && c.json.at("rope_parameters").contains("full_attention")) {
    // Per layer type (transformers 5's Gemma 3): the architecture reads it.
  } else if (c.has("rope_parameters")) {
    rope_parse(c.json.at("rope_parameters"), fmt::format("{}: rope_parameters", c.origin), rope);
  } else if (c.has("rope_scaling")) {
    rope_parse(c.json.at("rope_scaling"), fmt::format("{}: rope_scaling", c.origin), rope);
  }
  if (!(rope.theta > 1.0)) c.reject("rope_theta", "must be > 1");
  if (c.has("partial_rotary_factor") && c.get_number("partial_rotary_factor", 1.0) != 1.0) {
    c.reject("partial_rotary_factor", "partial rotary embeddings are not supported");
  }
}

// A [rows, columns] block size (weight_block_size, block_structure) into q.
void block_size_parse(const ConfigContext& c, std::string_view key, WeightQuantization& q) {
  const auto& block = c.json.at(std::string(key));
  const auto positive = [](const nlohmann::json& v) {
    return v.is_number_integer() && v.get<std::int64_t>() >= 1 && v.get<std::int64_t>() <= (1 << 20);
  };
  if (!block.is_array() || block.size() != 2 || !positive(block[0]) || !positive(block[1])) {
    c.reject(key, fmt::format("must be two positive integers [rows, columns], got {}", block.dump()));
  }
  q.scales = WeightQuantization::Scales::block;
  q.block_rows = block[0].get<std::int32_t>();
  q.block_cols = block[1].get<std::int32_t>();
}

// compressed-tensors: every config group's weights must be the same 8-bit float scheme.
void compressed_tensors_parse(const ConfigContext& qc, WeightQuantization& q) {
  if (qc.has("format") && qc.json.at("format") != "float-quantized") {
    qc.reject("format", fmt::format("{} is not supported (float-quantized)", qc.json.at("format").dump()));
  }
  if (qc.has("quantization_status") && qc.json.at("quantization_status") != "compressed" &&
      qc.json.at("quantization_status") != "frozen") {
    qc.reject("quantization_status",
              fmt::format("{} is not supported (compressed, frozen)", qc.json.at("quantization_status").dump()));
  }
  if (!qc.has("config_groups") || !qc.json.at("config_groups").is_object() || qc.json.at("config_groups").empty()) {
    qc.reject("config_groups", "must be a non-empty object");
  }
  bool first = true;
  for (const auto& [group_name, group] : qc.json.at("config_groups").items()) {
    const std::string origin = fmt::format("{}: config_groups.{}", qc.origin, group_name);
    if (!group.is_object() || !group.contains("weights") || !group.at("weights").is_object()) {
      fail(ExitCode::preparation, "{}: must hold a `weights` object", origin);
    }
    const std::string weights_origin = origin + ".weights";
    const ConfigContext w{group.at("weights"), weights_origin};
    if (!w.has("num_bits") || w.json.at("num_bits") != 8 || !w.has("type") || w.json.at("type") != "float") {
      w.reject("num_bits", "only 8-bit float weights (FP8 E4M3) are supported");
    }
    if (w.has("group_size")) w.reject("group_size", "group-wise scales are not supported");
    WeightQuantization scheme;
    std::string strategy;
    if (w.has("strategy") && w.json.at("strategy").is_string()) strategy = w.json.at("strategy").get<std::string>();
    if (strategy == "tensor") {
      scheme.scales = WeightQuantization::Scales::tensor;
    } else if (strategy == "channel") {
      scheme.scales = WeightQuantization::Scales::channel;
    } else if (strategy == "block" && w.has("block_structure")) {
      block_size_parse(w, "block_structure", scheme);
    } else {
      w.reject("strategy", fmt::format("{} is not supported (tensor, channel, block with block_structure)",
                                       w.has("strategy") ? w.json.at("strategy").dump() : "none"));
    }
    if (!first && (scheme.scales != q.scales || scheme.block_rows != q.block_rows || scheme.block_cols != q.block_cols)) {
      fail(ExitCode::preparation, "{}: differs from the other groups' weight scales (one scheme is supported)", origin);
    }
    q.scales = scheme.scales;
    q.block_rows = scheme.block_rows;
    q.block_cols = scheme.block_cols;
    first = false;
  }
  q.scale_suffix = "_scale";
}

// quantization_config: FP8 (E4M3) weights with tensor, channel or block scales, in HF's "fp8" or
// the "compressed-tensors" layout; any other method is an error naming it, never weights read as
// something they are not.
void quantization_parse(const ConfigContext& c, WeightQuantization& q) {
  if (!c.has("quantization_config")) return;
  const auto& dict = c.json.at("quantization_config");
  if (!dict.is_object()) c.reject("quantization_config", "must be an object");
  const std::string origin = fmt::format("{}: quantization_config", c.origin);
  const ConfigContext qc{dict, origin};
  if (!qc.has("quant_method") || !dict.at("quant_method").is_string()) qc.reject("quant_method", "must name the method");
  const std::string method = dict.at("quant_method").get<std::string>();
  if (method == "fp8") {
    if (qc.has("fmt") && (!dict.at("fmt").is_string() || dict.at("fmt") != "e4m3")) {
      qc.reject("fmt", fmt::format("{} is not supported (e4m3)", dict.at("fmt").dump()));
    }
    if (qc.has("weight_block_size")) block_size_parse(qc, "weight_block_size", q);
  } else if (method == "compressed-tensors") {
    compressed_tensors_parse(qc, q);
  } else if (method == "mxfp4") {
    q.mxfp4 = true;  // the architecture checks it has MXFP4 experts to read
    return;
  } else {
    qc.reject("quant_method", fmt::format("\"{}\" is not supported (fp8, compressed-tensors: FP8 E4M3 weights with "
                                          "tensor, channel or block scales; mxfp4: gpt-oss experts)",
                                          method));
  }
  q.fp8 = true;
}

void shared_parse(const ConfigContext& c, ModelSpec& spec) {
  if (c.has("model_type") && c.json.at("model_type").is_string()) spec.model_type = c.json.at("model_type");
  spec.vocab_size = c.get_positive_int("vocab_size");
  spec.hidden_size = c.get_positive_int("hidden_size");
  spec.intermediate_size = c.get_positive_int("intermediate_size");
  spec.n_layers = c.get_positive_int("num_hidden_layers");
  spec.n_heads = c.get_positive_int("num_attention_heads");
  spec.n_kv_heads = c.get_positive_int("num_key_value_heads", spec.n_heads);
  if (spec.n_heads % spec.n_kv_heads != 0) {
    c.reject("num_key_value_heads", fmt::format("{} does not divide num_attention_heads {}", spec.n_kv_heads, spec.n_heads));
  }
  if (!c.has("head_dim") && spec.hidden_size % spec.n_heads != 0) {
    c.reject("hidden_size", "is not a multiple of num_attention_heads and no head_dim is given");
  }
  spec.head_dim = c.get_positive_int("head_dim", spec.hidden_size / spec.n_heads);
  if (spec.head_dim % 2 != 0) c.reject("head_dim", "must be even for rotary embeddings");
  spec.max_position_embeddings = c.get_positive_int("max_position_embeddings", 4096);
  spec.rms_norm_eps = float(c.get_number("rms_norm_eps", 1e-6));
  if (!(spec.rms_norm_eps > 0)) c.reject("rms_norm_eps", "must be > 0");
  spec.tie_word_embeddings = c.get_bool("tie_word_embeddings", false);
  spec.layers.assign(std::size_t(spec.n_layers), LayerSpec{});
  for (const std::string_view key : {"hidden_act", "hidden_activation"}) {
    if (!c.has(key)) continue;
    const auto& act = c.json.at(std::string(key));
    if (act == "silu" || act == "swish") {
      spec.activation = Activation::silu;
    } else if (act == "gelu_pytorch_tanh") {
      spec.activation = Activation::gelu_tanh;
    } else {
      c.reject(key, fmt::format("activation {} is not supported (silu, gelu_pytorch_tanh)", act.dump()));
    }
  }
  rope_parse_config(c, spec.rope);
  quantization_parse(c, spec.quantization);
}

}  // namespace

ModelSpec model_spec_parse(std::string_view text, std::string_view origin) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(ExitCode::preparation, "{}: not valid JSON: {}", origin, e.what());
  }
  if (!json.is_object()) fail(ExitCode::preparation, "{}: must be a JSON object", origin);
  const ConfigContext c{json, origin};
  ModelSpec spec;
  if (!c.has("architectures") || !json.at("architectures").is_array() || json.at("architectures").size() != 1 ||
      !json.at("architectures")[0].is_string()) {
    c.reject("architectures", "must list exactly one architecture");
  }
  spec.architecture = json.at("architectures")[0].get<std::string>();
  const Architecture* architecture = architecture_find(spec.architecture);
  if (!architecture) {
    c.reject("architectures", fmt::format("architecture \"{}\" is not supported (supported: {})", spec.architecture,
                                          architecture_list()));
  }
  shared_parse(c, spec);
  architecture->configure(c, spec);
  return spec;
}

ModelSpec model_spec_load(const std::filesystem::path& dir) {
  const auto path = dir / "config.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ExitCode::preparation, "{}: cannot be read", path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  return model_spec_parse(buffer.str(), path.string());
}

}  // namespace flare::model
