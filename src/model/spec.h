// The model spec: what a checkpoint's config.json says, normalized into one plain struct that the
// architectures' forward programs, the memory plan and the recipes read. Parsing (config.cpp) is strict:
// an unknown architecture or an option we do not implement is an error naming the field, never a
// silently different model.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flare::model {

enum class RopeType { default_, linear, dynamic, yarn, llama3 };

struct RopeSpec {
  RopeType type = RopeType::default_;
  double theta = 10000.0;
  double factor = 1.0;                            // linear, dynamic, yarn, llama3
  std::int32_t original_max_position = 0;         // llama3, yarn (0: max_position_embeddings)
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  double beta_fast = 32.0, beta_slow = 1.0;       // yarn
  std::optional<double> attention_factor;         // yarn
  std::optional<double> mscale, mscale_all_dim;   // yarn
  bool truncate = true;                           // yarn
};

// How the checkpoint stores its linear weights (config.json `quantization_config`). FP8 checkpoints
// hold each projection as F8_E4M3 with F32/BF16 scales beside it; the weight is the FP8 value times
// its scale. Two layouts are read:
//   - quant_method "fp8", fmt "e4m3" (Qwen3-*-FP8, DeepSeek-V3 style): `<name>_scale_inv`, one scale
//     per block of weight_block_size (rows, columns), or one per tensor without it;
//   - quant_method "compressed-tensors" with 8-bit float weights (llm-compressor's FP8 models):
//     `<name>_scale`, one per tensor, per output channel or per block (block_structure).
// Preparation dequantizes them to BF16, exactly (an E4M3 value times a power-of-two scale is a
// BF16 value; other scales round once), so the runtime computes with BF16 weights and BF16 or F32
// activations where the reference implementations also quantize activations to FP8.
// quant_method "mxfp4" (gpt-oss): the experts are MXFP4 blocks (helios/mxfp4.h), everything else
// BF16; the package keeps the experts MXFP4.
struct WeightQuantization {
  enum class Scales : std::uint8_t { tensor, channel, block };
  bool fp8 = false;
  bool mxfp4 = false;
  Scales scales = Scales::tensor;
  std::int32_t block_rows = 0, block_cols = 0;  // Scales::block
  std::string scale_suffix = "_scale_inv";     // appended to the weight's name
};

// The MLP's gated activation (config.json `hidden_act` / `hidden_activation`).
enum class Activation : std::uint8_t {
  silu,       // silu(gate) * up: SwiGLU
  gelu_tanh,  // gelu_pytorch_tanh(gate) * up: GeGLU
};

// What differs between the layers of one model.
struct LayerSpec {
  std::int32_t sliding_window = 0;  // 0: attends to every position; W: to the last W positions
  bool experts = false;             // its MLP is the mixture of experts (MoeSpec), else dense
};

// A mixture-of-experts MLP (Qwen3-MoE, Mixtral): per token a router (a linear map to one logit per
// expert) picks top_k of n_experts gated MLPs of expert_intermediate_size, whose outputs are summed
// with the router's weights.
struct MoeSpec {
  std::int32_t n_experts = 0;  // 0: a dense model
  std::int32_t top_k = 0;
  std::int32_t expert_intermediate_size = 0;
  bool renormalize = true;  // the chosen experts' probabilities divided by their sum (norm_topk_prob)
  // gpt-oss's experts: gate = min(gate, limit), up = clamp(up, -limit, limit), (up + 1) * gate *
  // sigmoid(1.702 gate) in place of silu(gate) * up; 0: plain SwiGLU.
  float swiglu_limit = 0.0f;
};

struct ModelSpec {
  std::string architecture;  // e.g. "Qwen3ForCausalLM"
  std::string model_type;    // e.g. "qwen3"
  std::int32_t vocab_size = 0;
  std::int32_t hidden_size = 0;
  std::int32_t intermediate_size = 0;
  std::int32_t n_layers = 0;
  std::int32_t n_heads = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;
  std::int32_t max_position_embeddings = 0;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;
  bool qk_norm = false;      // per-head RMSNorm of q and k before rotary (Qwen3)
  bool qkv_bias = false;     // biases on q, k, v projections (Qwen2, Llama attention_bias)
  bool o_bias = false;       // bias on the output projection (Llama attention_bias)
  Activation activation = Activation::silu;
  std::vector<LayerSpec> layers;  // [n_layers]
  RopeSpec rope;
  // The rope of sliding-window layers where it differs from `rope` (Gemma 3's rope_local_base_freq).
  std::optional<RopeSpec> sliding_rope;
  float attention_scale = 0.0f;      // softmax scale; 0: 1 / sqrt(head_dim)
  float final_logit_softcap = 0.0f;  // 0: none; c: logits = c * tanh(logits / c)
  WeightQuantization quantization;
  MoeSpec moe;

  std::int64_t n_parameters() const;
  // Parameters one token multiplies by: n_parameters() less the experts the router leaves out.
  std::int64_t n_active_parameters() const;
  std::int32_t q_width() const { return n_heads * head_dim; }
  std::int32_t kv_width() const { return n_kv_heads * head_dim; }
  float softmax_scale() const { return attention_scale > 0 ? attention_scale : 1.0f / std::sqrt(float(head_dim)); }
};

// Parses config.json text (`origin` names it in errors). Throws flare::Error (preparation).
ModelSpec model_spec_parse(std::string_view config_json, std::string_view origin = "config.json");
ModelSpec model_spec_load(const std::filesystem::path& checkpoint_dir);

}  // namespace flare::model
