// One declarative weight table per architecture: every prepared tensor once, with the checkpoint
// tensors it is made of, its shape as the spec gives it, its role, and the axis a tensor-parallel
// split would cut. Preparation (prepared_weights.cpp), loading, the benchmark's random weights, the
// export's byte count, the parameter count and the profiler's names are all derived from it, so an
// architecture's layout is written in exactly one place.
//
// Payload groups keep the package layout: "weights/embedding" (embedding, final norm, the output
// head when untied) and one "weights/layer-NNN" per layer, so unchanged layers deduplicate by
// content hash across exports.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "helios/backend.h"
#include "model/spec.h"

namespace flare::model {

enum class WeightKind : std::uint8_t {
  projection,  // a GEMM's weight [rows, cols]: BF16, or FP8 with scales where the checkpoint has them
  table,       // [rows, cols] BF16 always (embedding, output head)
  vector,      // [rows] F32 (norm weights, biases)
};

// A transform preparation applies to the checkpoint's values.
enum class WeightTransform : std::uint8_t {
  none,
  plus_one,  // stores 1 + w: Gemma's RMSNorm scales by (1 + weight)
  // Rows (of each matrix of a stack) stored as interleaved pairs, gate and up alternating (gpt-oss),
  // put back as all the even rows, then all the odd ones.
  deinterleave_rows,
};

// How a tensor-parallel plan would cut the tensor: replicated, split by output rows (column
// parallel: q/k/v, gate/up, vocabulary), or by input columns (row parallel: o, down).
enum class TensorSplit : std::uint8_t { replicated, rows, cols };

// A checkpoint tensor (full name) and the rows it contributes; parts stack row-wise in order.
struct WeightSource {
  std::string name;
  std::int64_t rows = 0;
};

struct WeightEntry {
  std::string name;  // prepared name: "embed", "layers.3.qkv", ...
  WeightKind kind = WeightKind::projection;
  std::vector<WeightSource> sources;
  std::int64_t cols = 0;  // projections and tables; 0 for vectors
  std::string role;       // what it is in the forward: "qkv", "o", "gate_up", "down", "lm_head", "norm", ...
  WeightTransform transform = WeightTransform::none;
  TensorSplit split = TensorSplit::replicated;
  // A stack of this many equal matrices (a mixture-of-experts layer's experts): the sources stack
  // each matrix's parts in turn, and the runtime sees [n_batch][rows() / n_batch, cols].
  std::int32_t n_batch = 1;
  // A projection the checkpoint stores as MXFP4 (`<source>_blocks`, `<source>_scales`) and the
  // package keeps so: values U8 [rows, cols / 2] and "<name>.scales" U8 [rows, cols / 32].
  bool mxfp4 = false;

  std::int64_t rows() const;
  std::int64_t n_elements() const { return rows() * (kind == WeightKind::vector ? 1 : cols); }
};

struct WeightGroup {
  std::string payload_name;  // "weights/embedding", "weights/layer-000"
  std::vector<WeightEntry> entries;
};

struct WeightTable {
  std::vector<WeightGroup> groups;
  // Names that share another entry's tensor (a tied output head: "lm_head" -> "embed").
  std::map<std::string, std::string> aliases;

  const WeightEntry* find(std::string_view name) const;
  std::int64_t n_parameters() const;  // every element once (aliases share)
  // What one token multiplies by: every element, but of each expert stack only top_k of its n_batch
  // matrices (the experts one token activates).
  std::int64_t n_active_parameters(std::int32_t top_k) const;
  // Bytes of the prepared tensors with BF16 projections and tables and F32 vectors; given an FP8
  // checkpoint's quantization, its expert stacks at stored precision (a byte a value, F32 scales
  // and the block shape) where every backend keeps them FP8 (weight_table.cpp). Other FP8
  // matrices count as BF16: a backend without FP8 GEMMs for them dequantizes them at load.
  std::uint64_t prepared_bytes(const WeightQuantization& quantization = {}) const;
};

// A loaded weight: its values on a backend and, for FP8 values, their scales.
struct Weight {
  helios::Tensor values;
  helios::QuantizedWeight quant;
};

// The weights of a model on a backend, by prepared name; owns their device memory.
class LoadedWeights {
 public:
  void add(std::string name, Weight weight);
  void own(std::unique_ptr<helios::Buffer> buffer) { buffers_.push_back(std::move(buffer)); }
  const Weight* find(std::string_view name) const;
  const Weight& at(std::string_view name) const;  // flare::Error when absent
  // The tensor of `name`, or an empty tensor when the model has none by that name.
  helios::Tensor tensor_or_empty(std::string_view name) const;
  // Each projection's and table's role by the address of its values (the profiler's names).
  std::map<const void*, std::string> roles_by_address(const WeightTable& table) const;

 private:
  std::map<std::string, Weight, std::less<>> weights_;
  std::vector<std::unique_ptr<helios::Buffer>> buffers_;
};

}  // namespace flare::model
