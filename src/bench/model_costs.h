// What a step costs in bytes and FLOPs, from the model spec alone: the figures the benchmark
// divides by measured device rates to get bounds. Counts follow the architecture's weight table
// (BF16 matrices, F32 norm weights and biases) and its history specs.
#pragma once

#include <cstdint>

#include "helios/dtype.h"
#include "model/spec.h"

namespace flare::bench {

// Weight bytes a decode step reads once: every layer's matrices, norms and biases, the final norm
// and the output head. The embedding table is not counted: a step reads only its tokens' rows.
// `matrices`: the layers' projection matrices, bf16 or f8_e4m3 (with 128 x 128 block scales); the
// output head stays BF16.
// Of an expert stack, only the router's top_k experts a layer are read (what one token touches);
// expert stacks stay BF16, or MXFP4 where the weight table says so (gpt-oss).
double decode_weight_bytes(const model::ModelSpec& spec, helios::DType matrices = helios::DType::bf16);

// K and V bytes of one cached token over all layers.
double kv_bytes_per_token(const model::ModelSpec& spec, helios::DType kv_dtype);
// K and V bytes one decode row's attention in `layer` reads at `context` positions: only its
// window's on a sliding-window layer.
double kv_bytes_read(const model::ModelSpec& spec, std::int32_t layer, std::int64_t context, helios::DType kv_dtype);

// FLOPs of one prefill row of `n_tokens` from position 0 with `n_logits` logits rows: 2 x (layer
// projection parameters, of expert stacks the top_k experts a token runs) x tokens, plus causal attention (QK^T and PV over each token's visible
// positions: 4 x n_heads x head_dim x n(n+1)/2 per layer), plus the output head for the logits rows.
double prefill_flops(const model::ModelSpec& spec, std::int64_t n_tokens, std::int64_t n_logits = 1);

}  // namespace flare::bench
