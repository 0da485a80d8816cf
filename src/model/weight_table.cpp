// Weight tables and loaded weights (see weight_table.h).
#include "model/weight_table.h"

#include <algorithm>

#include "common/error.h"

namespace flare::model {

std::int64_t WeightEntry::rows() const {
  std::int64_t n = 0;
  for (const WeightSource& source : sources) n += source.rows;
  return n;
}

const WeightEntry* WeightTable::find(std::string_view name) const {
  for (const WeightGroup& group : groups) {
    for (const WeightEntry& entry : group.entries) {
      if (entry.name == name) return &entry;
    }
  }
  return nullptr;
}

std::int64_t WeightTable::n_parameters() const {
  std::int64_t n = 0;
  for (const WeightGroup& group : groups) {
    for (const WeightEntry& entry : group.entries) n += entry.n_elements();
  }
  return n;
}

std::int64_t WeightTable::n_active_parameters(std::int32_t top_k) const {
  std::int64_t n = 0;
  for (const WeightGroup& group : groups) {
    for (const WeightEntry& entry : group.entries) {
      n += entry.n_batch > 1 ? entry.n_elements() / entry.n_batch * std::min(top_k, entry.n_batch) : entry.n_elements();
    }
  }
  return n;
}

namespace {

// The prepared bytes of an FP8 expert stack [n_batch][rows, cols] of checkpoint quantization `q`, or
// 0 where a backend may dequantize it: the CUDA expert kernels take blocks whose columns are a power
// of two of at least 32 (or span the row) over rows of whole 32-value slices, and stacking keeps FP8
// only where each expert's rows are whole blocks (tensor and channel scales become one per row).
std::uint64_t fp8_expert_stack_bytes(const WeightQuantization& q, std::int64_t n_batch, std::int64_t rows,
                                     std::int64_t cols) {
  if (!q.fp8 || cols % 32 != 0) return 0;
  const std::uint64_t values = std::uint64_t(n_batch * rows * cols), block_shape = 8;
  if (q.scales != WeightQuantization::Scales::block) return values + std::uint64_t(n_batch * rows) * 4 + block_shape;
  const std::int64_t br = q.block_rows, bc = q.block_cols;
  const bool cuda_blocks = bc >= cols || (bc >= 32 && (bc & (bc - 1)) == 0);
  if (br < 1 || bc < 1 || rows % br != 0 || !cuda_blocks) return 0;
  return values + std::uint64_t(n_batch * (rows / br) * ((cols + bc - 1) / bc)) * 4 + block_shape;
}

}  // namespace

std::uint64_t WeightTable::prepared_bytes(const WeightQuantization& quantization) const {
  std::uint64_t bytes = 0;
  for (const WeightGroup& group : groups) {
    for (const WeightEntry& entry : group.entries) {
      const auto n = std::uint64_t(entry.n_elements());
      if (entry.kind == WeightKind::projection && entry.n_batch > 1 && !entry.mxfp4) {
        const std::uint64_t fp8 =
            fp8_expert_stack_bytes(quantization, entry.n_batch, entry.rows() / entry.n_batch, entry.cols);
        if (fp8 > 0) {
          bytes += fp8;
          continue;
        }
      }
      bytes += entry.mxfp4 ? n / 2 + n / 32 : n * (entry.kind == WeightKind::vector ? 4 : 2);
    }
  }
  return bytes;
}

void LoadedWeights::add(std::string name, Weight weight) { weights_.insert_or_assign(std::move(name), weight); }

const Weight* LoadedWeights::find(std::string_view name) const {
  const auto it = weights_.find(name);
  return it == weights_.end() ? nullptr : &it->second;
}

const Weight& LoadedWeights::at(std::string_view name) const {
  const Weight* weight = find(name);
  if (!weight) fail(ExitCode::failure, "internal: the model has no weight '{}'", name);
  return *weight;
}

helios::Tensor LoadedWeights::tensor_or_empty(std::string_view name) const {
  const Weight* weight = find(name);
  return weight ? weight->values : helios::Tensor{};
}

std::map<const void*, std::string> LoadedWeights::roles_by_address(const WeightTable& table) const {
  std::map<const void*, std::string> roles;
  for (const WeightGroup& group : table.groups) {
    for (const WeightEntry& entry : group.entries) {
      if (entry.kind == WeightKind::vector) continue;
      if (const Weight* weight = find(entry.name)) roles.emplace(weight->values.data, entry.role);
    }
  }
  for (const auto& [alias, target] : table.aliases) {
    const WeightEntry* entry = table.find(alias);
    if (const Weight* weight = find(alias); weight && !entry) roles.insert_or_assign(weight->values.data, alias);
  }
  return roles;
}

}  // namespace flare::model
