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

// Paged K/V of n_kv_heads x head_dim for every layer, with each layer's window.
std::vector<helios::HistorySpec> paged_kv_history(const ModelSpec& spec);
// Throws unless `layout` is the cache paged_kv_history describes.
void paged_kv_check(const ModelSpec& spec, const helios::KvCacheLayout& layout);
// The kernel needs of a program whose every layer runs rotary_kv_store and attention at the spec's
// heads (its windows are launch arguments), with FP8 projections where the checkpoint is FP8.
void paged_attention_kernel_needs(const ModelSpec& spec, helios::KernelNeeds& needs);

}  // namespace flare::model
