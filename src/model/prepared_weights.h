// The prepared weight layout: what `ignition export` stores in a package and what `flare run`
// loads without conversion, as the architecture's weight table (weight_table.h) declares it.
// Preparation reads the checkpoint once, fuses the parts the table stacks (q/k/v, gate/up), and
// converts matrices to BF16 and norms and biases to F32 (the same layout weights_load builds on a
// backend); the runtime copies each prepared tensor straight into a backend buffer. An FP8
// checkpoint's projection matrices stay FP8 E4M3 (`<name>` [rows, cols]) with block scales
// (`<name>.scales` f32, `<name>.scale_block` i32 [block rows, block cols]; fp8_matrix.h) where the
// fused parts' scales stack; a backend without FP8 weights gets them dequantized to BF16 at load,
// the values a BF16 package would hold.
//
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "helios/backend.h"
#include "model/model.h"
#include "model/spec.h"

namespace flare::model {

struct PreparedTensor {
  std::string name;  // "embed", "final_norm", "lm_head", "layers.3.qkv", ...
  helios::DType dtype = helios::DType::bf16;
  std::vector<std::int64_t> shape;  // [rows, cols] or [n]
  std::vector<std::byte> bytes;
};

struct PreparedGroup {
  std::string payload_name;  // "weights/embedding", "weights/layer-000"
  std::vector<PreparedTensor> tensors;
};

// Reads the checkpoint and calls `sink` once per group of the table, in its order (one group in
// memory at a time). Checkpoint problems are flare::Error (preparation).
void prepare_weights(const ModelSpec& spec, const std::filesystem::path& checkpoint_dir,
                     const std::function<void(PreparedGroup&&)>& sink);

// A prepared tensor as stored: dtype, shape and its bytes (e.g. inside a verified package payload).
struct PreparedTensorRef {
  helios::DType dtype = helios::DType::bf16;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;
};
// Looks a prepared tensor up by name; returns false when it is absent.
using PreparedLookup = std::function<bool(const std::string& name, PreparedTensorRef& out)>;

// Builds the backend's weights from prepared tensors, checking every name, dtype, shape and size
// against the table; a mismatch is a flare::Error naming the tensor.
// A matrix of n_batch stacked equal matrices as the stack [n_batch][rows / n_batch, cols] (itself for 1).
helios::Tensor as_stack(helios::Tensor matrix, std::int32_t n_batch);

// A vector of n_batch stacked equal vectors as the stack [n_batch][1, cols / n_batch].
helios::Tensor vector_stack(helios::Tensor vector, std::int32_t n_batch);

LoadedWeights weights_from_prepared(const ModelSpec& spec, const PreparedLookup& lookup, helios::Backend& backend);

}  // namespace flare::model
