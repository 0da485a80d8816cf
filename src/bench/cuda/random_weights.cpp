#include "bench/cuda/random_weights.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/prepared_weights.h"

namespace flare::bench::cuda {
namespace {

using helios::DType;
using model::WeightKind;

constexpr float k_matrix_scale = 0.02f, k_norm_spread = 0.05f;

struct Builder {
  helios::Backend& backend;
  DeviceFill& fill;
  model::LoadedWeights& weights;
  std::uint64_t seed;
  DType matrices;
  std::int64_t max_fp8_cols = 0;

  helios::Tensor make(DType dtype, std::int64_t rows, std::int64_t cols, float scale, float offset) {
    auto buffer = backend.allocate(std::size_t(rows * cols) * helios::dtype_size_bytes(dtype));
    const helios::Tensor t = helios::Tensor::of(*buffer, dtype, rows, cols);
    fill.tensor(t, seed++, scale, offset);
    weights.own(std::move(buffer));
    return t;
  }
  // A projection matrix [rows, cols], or a stack of n_batch matrices (experts): FP8 with 128 x 128
  // block scales where asked for and the backend takes it (supports_fp8_weights, for stacks
  // supports_fp8_experts, as the loader decides), a stack's scales a stack too; else BF16 (and the
  // router always, as FP8 checkpoints leave it).
  model::Weight projection(const model::WeightEntry& entry) {
    model::Weight w;
    const std::int32_t n_batch = entry.n_batch;
    const std::int64_t rows = entry.rows(), cols = entry.cols, matrix_rows = rows / n_batch;
    const bool fp8 = matrices == DType::f8_e4m3 && entry.role != "router" &&
                     (n_batch == 1 ? backend.supports_fp8_weights(rows, cols, 128, 128)
                                   : matrix_rows % 128 == 0 && backend.supports_fp8_experts(matrix_rows, cols, 128, 128));
    if (!fp8) {
      w.values = model::as_stack(make(DType::bf16, rows, cols, k_matrix_scale, 0), n_batch);
      return w;
    }
    w.quant.format = helios::QuantizedWeight::Format::fp8_e4m3;
    w.quant.block_rows = w.quant.block_cols = 128;
    w.quant.scales = model::as_stack(make(DType::f32, (rows + 127) / 128, (cols + 127) / 128, 0.001f, 0.005f), n_batch);
    if (n_batch == 1) max_fp8_cols = std::max(max_fp8_cols, cols);
    w.values = model::as_stack(make(DType::f8_e4m3, rows, cols, 0, 0), n_batch);
    return w;
  }
  // An MXFP4 expert stack [rows, cols] (gpt-oss): random value bytes (two E2M1 values each) and
  // E8M0 scales of 2^-8 .. 2^-6, so the weights' spread is about k_matrix_scale's. The scales
  // (a 64th of the values' bytes) are drawn on the host: the fill kernel has no byte fill.
  model::Weight mxfp4(std::int64_t rows, std::int64_t cols) {
    model::Weight w;
    w.quant.format = helios::QuantizedWeight::Format::mxfp4;
    w.quant.block_rows = 1;
    w.quant.block_cols = 32;
    w.values = make(DType::f8_e4m3, rows, cols / 2, 0, 0);  // random bytes; any byte is two E2M1 values
    w.values.dtype = DType::u8;
    std::vector<std::uint8_t> scales(std::size_t(rows * (cols / 32)));
    std::uint64_t x = seed++ | 1;
    for (auto& e : scales) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      e = std::uint8_t(119 + x % 3);
    }
    auto buffer = backend.allocate(scales.size());
    backend.upload(*buffer, 0, scales.data(), scales.size());
    w.quant.scales = helios::Tensor::of(*buffer, DType::u8, rows, cols / 32);
    weights.own(std::move(buffer));
    return w;
  }
  // Norm weights around 1, biases around 0.
  model::Weight vector(const model::WeightEntry& entry) {
    const bool norm = entry.role == "norm";
    return {make(DType::f32, 1, entry.rows(), norm ? k_norm_spread : k_matrix_scale, norm ? 1.0f : 0.0f), {}};
  }
};

}  // namespace

model::LoadedWeights random_weights(const model::ModelSpec& spec, helios::Backend& backend, DeviceFill& fill,
                                    std::uint64_t seed, DType matrices) {
  model::LoadedWeights weights;
  Builder b{backend, fill, weights, seed * 1000003, matrices};
  const model::WeightTable table = model::architecture_of(spec).weight_table(spec);
  for (const model::WeightGroup& group : table.groups) {
    for (const model::WeightEntry& entry : group.entries) {
      switch (entry.kind) {
        case WeightKind::projection: {
          model::Weight w = entry.mxfp4 ? b.mxfp4(entry.rows(), entry.cols)
                                        : b.projection(entry);
          if (entry.mxfp4) {
            w.values = model::as_stack(w.values, entry.n_batch);
            w.quant.scales = model::as_stack(w.quant.scales, entry.n_batch);
          }
          weights.add(entry.name, w);
          break;
        }
        case WeightKind::table:
          weights.add(entry.name, {b.make(DType::bf16, entry.rows(), entry.cols, k_matrix_scale, 0), {}});
          break;
        case WeightKind::vector: {  // expert biases: a stack of vectors
          model::Weight w = b.vector(entry);
          w.values = model::vector_stack(w.values, entry.n_batch);
          weights.add(entry.name, w);
          break;
        }
      }
    }
  }
  for (const auto& [alias, target] : table.aliases) weights.add(alias, weights.at(target));
  if (b.max_fp8_cols > 0) backend.reserve_fp8_linear(b.max_fp8_cols);
  backend.synchronize();
  return weights;
}

}  // namespace flare::bench::cuda
