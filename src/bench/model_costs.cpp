#include "bench/model_costs.h"

#include <algorithm>

#include "helios/history.h"
#include "model/architecture.h"

namespace flare::bench {
namespace {

using model::WeightKind;

// Elements of every layer's projection matrices that a step reads: of an expert stack, `experts`
// of its matrices (expert_stack_bytes adds them up separately, in their own formats).
double layer_matrix_parameters(const model::WeightTable& table, double experts, bool expert_stacks) {
  double n = 0;
  for (const model::WeightGroup& group : table.groups) {
    for (const model::WeightEntry& entry : group.entries) {
      if (entry.kind != WeightKind::projection || (entry.n_batch > 1) != expert_stacks) continue;
      n += entry.n_batch > 1 ? double(entry.n_elements()) / entry.n_batch * experts : double(entry.n_elements());
    }
  }
  return n;
}

// Bytes of `experts` matrices of every expert stack and their biases: `per_weight` bytes a value
// (BF16 or FP8 with its block scales), or MXFP4 (half a byte a value and a scale byte per 32).
double expert_stack_bytes(const model::WeightTable& table, double experts, double per_weight) {
  double bytes = 0;
  for (const model::WeightGroup& group : table.groups) {
    for (const model::WeightEntry& entry : group.entries) {
      if (entry.n_batch <= 1) continue;
      const double per_value = entry.kind == WeightKind::vector ? 4.0 : entry.mxfp4 ? 0.5 + 1.0 / 32 : per_weight;
      bytes += per_value * double(entry.n_elements()) / entry.n_batch * experts;
    }
  }
  return bytes;
}

// The routers' elements (BF16 in FP8 checkpoints and in the bench's FP8 random weights).
double router_parameters(const model::WeightTable& table) {
  double n = 0;
  for (const model::WeightGroup& group : table.groups) {
    for (const model::WeightEntry& entry : group.entries) {
      if (entry.kind == WeightKind::projection && entry.role == "router") n += double(entry.n_elements());
    }
  }
  return n;
}

// The output head's elements (the embedding's, when tied).
double head_parameters(const model::WeightTable& table) {
  const model::WeightEntry* head = table.find("lm_head");
  if (!head && table.aliases.contains("lm_head")) head = table.find(table.aliases.at("lm_head"));
  return head ? double(head->n_elements()) : 0.0;
}

}  // namespace

double decode_weight_bytes(const model::ModelSpec& s, helios::DType matrices) {
  const model::WeightTable table = model::architecture_of(s).weight_table(s);
  const double experts = double(s.moe.top_k);
  // FP8 matrices (experts too, not the routers): a byte per weight and an f32 scale per 128 x 128 block.
  const double per_weight = matrices == helios::DType::f8_e4m3 ? 1.0 + 4.0 / (128 * 128) : 2.0;
  double vectors = 0;
  for (const model::WeightGroup& group : table.groups) {
    for (const model::WeightEntry& entry : group.entries) {
      if (entry.kind == WeightKind::vector && entry.n_batch <= 1) vectors += 4.0 * double(entry.n_elements());
    }
  }
  const double routers = router_parameters(table);
  return per_weight * (layer_matrix_parameters(table, 0, false) - routers) + 2.0 * routers +
         expert_stack_bytes(table, experts, per_weight) + vectors +
         2.0 * head_parameters(table);
}

double kv_bytes_per_token(const model::ModelSpec& s, helios::DType kv_dtype) {
  return double(helios::history_bytes_per_token(model::architecture_of(s).history(s), kv_dtype));
}

double kv_bytes_read(const model::ModelSpec& s, std::int32_t layer, std::int64_t context, helios::DType kv_dtype) {
  const std::vector<helios::HistorySpec> history = model::architecture_of(s).history(s);
  const auto& kv = std::get<helios::PagedKvSpec>(history.at(std::size_t(layer)));
  const std::int64_t visible = kv.sliding_window > 0 ? std::min<std::int64_t>(context, kv.sliding_window) : context;
  return double(visible) * double(kv.n_kv_heads) * double(kv.k_dim + kv.v_dim) *
         double(helios::dtype_size_bytes(kv_dtype));
}

double prefill_flops(const model::ModelSpec& s, std::int64_t n_tokens, std::int64_t n_logits) {
  const model::WeightTable table = model::architecture_of(s).weight_table(s);
  const double n = double(n_tokens);
  const double linear =
      2.0 * (layer_matrix_parameters(table, 0, false) + layer_matrix_parameters(table, s.moe.top_k, true)) * n;
  const double attention = 4.0 * s.n_heads * s.head_dim * (n * (n + 1) / 2) * s.n_layers;
  const double head = 2.0 * double(n_logits) * head_parameters(table);
  return linear + attention + head;
}

}  // namespace flare::bench
