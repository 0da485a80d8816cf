// Building blocks the architectures' forward programs share (llama.cpp's build_* helpers): small
// compositions of backend operations that do not belong to any one architecture.
#pragma once

#include <string>
#include <vector>

#include "helios/backend.h"
#include "helios/history.h"
#include "helios/serving_catalog.h"
#include "model/spec.h"
#include "model/weight_table.h"

namespace flare::model {

// out = x @ weight^T (+ bias): Backend::linear, or linear_fp8 for a weight kept as FP8.
inline void project(helios::Backend& backend, const helios::Tensor& x, const Weight& weight, const helios::Tensor* bias,
                    helios::Tensor out) {
  if (weight.quant.format == helios::QuantizedWeight::Format::fp8_e4m3) {
    backend.linear_fp8(x, weight.values, weight.quant, bias, out);
  } else {
    backend.linear(x, weight.values, bias, out);
  }
}

// "weights/embedding": the embedding, the final norm (with `norm_transform`) and the output head,
// or an alias of the embedding for it when tied.
WeightGroup embedding_group(const ModelSpec& spec, WeightTable& table, WeightTransform norm_transform);
// The usual attention and MLP projections of one layer: checkpoint names under `prefix`
// ("model.layers.3."), prepared names under `name` ("layers.3.").
WeightEntry qkv_entry(const ModelSpec& spec, const std::string& prefix, const std::string& name);
WeightEntry o_entry(const ModelSpec& spec, const std::string& prefix, const std::string& name);
WeightEntry gate_up_entry(const ModelSpec& spec, const std::string& prefix, const std::string& name);
WeightEntry down_entry(const ModelSpec& spec, const std::string& prefix, const std::string& name);

// A vector (norm weight, bias) of n values from one checkpoint tensor.
WeightEntry vector_entry(std::string name, std::string source, std::int64_t n, std::string role);

// The attention projections of one layer (qkv, o, and where the spec has them their biases and the
// q/k head norms), appended to `entries`; and the same once loaded.
void attention_entries(const ModelSpec& spec, const std::string& prefix, const std::string& name,
                       std::vector<WeightEntry>& entries);
struct AttentionWeights {
  Weight qkv, o;
  helios::Tensor qkv_bias, o_bias, q_norm, k_norm;  // f32, empty where the model has none
  helios::Tensor sinks;                             // [1, n_heads] f32 (gpt-oss), or empty
};
AttentionWeights attention_weights(const LoadedWeights& weights, const std::string& name);

// The attention of layer `layer` up to its output projection:
//   qkv = h Wqkv (+b); [q/k head norm]; rotary; k, v into the layer's pages; attn = attention(q)
// h [n_tokens, hidden], qkv [n_tokens, q + 2 kv], attn [n_tokens, q] (activations).
void attention_core(helios::Backend& backend, const ModelSpec& spec, std::int32_t layer, const AttentionWeights& w,
                    const helios::Tensor& h, const helios::Tensor& qkv, const helios::Tensor& attn,
                    helios::HistoryCaches& caches, const helios::RotaryParams& rope);

// The residual stream around a block's output: x [n_tokens, hidden], h its norm (the next block's
// input), delta scratch for the block's output before the add.
struct ResidualViews {
  helios::Tensor x, h, delta;
};
// delta = in @ w^T (+ bias); x += delta; h = rms_norm(x) * norm_weight. One backend operation
// (Backend::linear_residual_rms_norm) for BF16 weights without a bias, so a device backend may fuse
// the GEMM's reduction into the norm; else the projection, then the norm.
void project_residual_norm(helios::Backend& backend, float eps, const ResidualViews& v, const helios::Tensor& in,
                           const Weight& w, const helios::Tensor& bias, const helios::Tensor& norm_weight);
// act = silu(gate) * up of h @ gate_up^T: one backend operation (Backend::linear_swiglu) for BF16
// weights, else the projection into `gate_up` scratch, then swiglu.
void swiglu_mlp_up(helios::Backend& backend, const helios::Tensor& h, const Weight& gate_up,
                   const helios::Tensor& gate_up_scratch, const helios::Tensor& act);

// Paged K/V of n_kv_heads x head_dim for every layer, with each layer's window.
std::vector<helios::HistorySpec> paged_kv_history(const ModelSpec& spec);
// Throws unless `layout` is the caches paged_kv_history describes.
void paged_kv_check(const ModelSpec& spec, const helios::HistoryLayout& layout);
// The kernel needs of a program whose every layer runs rotary_kv_store and attention at the spec's
// heads (its windows are launch arguments), with FP8 projections where the checkpoint is FP8.
void paged_attention_kernel_needs(const ModelSpec& spec, helios::KernelNeeds& needs);
// The same and the mixture-of-experts kernels.
void moe_kernel_needs(const ModelSpec& spec, helios::KernelNeeds& needs);

}  // namespace flare::model
