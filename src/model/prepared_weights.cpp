#include "model/prepared_weights.h"

#include <algorithm>
#include <cstring>
#include <span>

#include <fmt/format.h>

#include "common/error.h"
#include "model/architecture.h"
#include "model/checkpoint.h"
#include "model/fp8_matrix.h"

namespace flare::model {
namespace {

using helios::DType;

template <typename T>
std::vector<std::byte> to_bytes(const std::vector<T>& values) {
  std::vector<std::byte> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Each of n_batch matrices of `rows` rows of `row_elements` values: interleaved row pairs (even, odd)
// put back as the even rows, then the odd ones.
template <typename T>
void deinterleave_rows(std::vector<T>& data, std::int64_t n_batch, std::int64_t rows, std::int64_t row_elements) {
  if (rows % 2 != 0) fail(ExitCode::preparation, "interleaved rows: {} rows do not pair up", rows);
  std::vector<T> out(data.size());
  const auto row_size = std::size_t(row_elements);
  for (std::int64_t b = 0; b < n_batch; ++b) {
    const std::size_t base = std::size_t(b * rows) * row_size;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t to = (r % 2 == 0 ? 0 : rows / 2) + r / 2;
      std::copy_n(data.begin() + std::ptrdiff_t(base + std::size_t(r) * row_size), row_size,
                  out.begin() + std::ptrdiff_t(base + std::size_t(to) * row_size));
    }
  }
  data = std::move(out);
}

struct GroupBuilder {
  const Checkpoint& ckpt;
  PreparedGroup group;

  // An MXFP4 stack as stored (one source holding every expert), rows deinterleaved where asked.
  void mxfp4_matrix(const WeightEntry& entry) {
    if (entry.sources.size() != 1) fail(ExitCode::failure, "internal: MXFP4 entry '{}' has {} sources", entry.name, entry.sources.size());
    Mxfp4Matrix m = ckpt.read_mxfp4(entry.sources[0].name, entry.rows(), entry.cols);
    if (entry.transform == WeightTransform::deinterleave_rows) {
      const std::int64_t rows = entry.rows() / entry.n_batch;
      deinterleave_rows(m.values, entry.n_batch, rows, entry.cols / 2);
      deinterleave_rows(m.scales, entry.n_batch, rows, entry.cols / 32);
    }
    group.tensors.push_back({entry.name + ".scales", DType::u8, {m.rows, m.cols / 32}, to_bytes(m.scales)});
    group.tensors.push_back({entry.name, DType::u8, {m.rows, m.cols / 2}, to_bytes(m.values)});
  }

  // A matrix from its row-stacked parts: FP8 as stored (with its scales) when every part is FP8 and
  // their scales stack (fp8_stack), else BF16.
  void matrix(std::string name, const std::vector<WeightSource>& sources, std::int64_t cols) {
    bool all_fp8 = true;
    for (const WeightSource& source : sources) all_fp8 = all_fp8 && ckpt.is_fp8(source.name);
    if (all_fp8) {
      std::vector<Fp8Matrix> parts;
      for (const WeightSource& source : sources) parts.push_back(ckpt.read_fp8(source.name, {source.rows, cols}));
      Fp8Matrix stacked;
      if (fp8_stack(parts, stacked)) return fp8_matrix(std::move(name), stacked);
    }
    std::vector<std::uint16_t> data;
    std::int64_t n_rows = 0;
    for (const WeightSource& source : sources) {
      const auto part = ckpt.read_bf16(source.name, {source.rows, cols});
      data.insert(data.end(), part.begin(), part.end());
      n_rows += source.rows;
    }
    group.tensors.push_back({std::move(name), DType::bf16, {n_rows, cols}, to_bytes(data)});
  }

  // `name` e4m3 [rows, cols], `name`.scales f32 [scale rows, scale cols], `name`.scale_block i32
  // [block rows, block cols].
  void fp8_matrix(std::string name, const Fp8Matrix& m) {
    std::vector<std::byte> values(m.values.size());
    std::memcpy(values.data(), m.values.data(), values.size());
    group.tensors.push_back({name + ".scales", DType::f32, {m.scale_rows(), m.scale_cols()}, to_bytes(m.scales)});
    group.tensors.push_back({name + ".scale_block", DType::i32, {2},
                             to_bytes(std::vector<std::int32_t>{std::int32_t(m.block_rows), std::int32_t(m.block_cols)})});
    group.tensors.push_back({std::move(name), DType::f8_e4m3, {m.rows, m.cols}, std::move(values)});
  }

  void vector(std::string name, const std::vector<WeightSource>& sources, WeightTransform transform,
              std::int32_t n_batch) {
    std::vector<float> data;
    for (const WeightSource& source : sources) {
      const auto part = ckpt.read_f32(source.name, {source.rows});
      data.insert(data.end(), part.begin(), part.end());
    }
    if (transform == WeightTransform::plus_one) {
      for (float& value : data) value = 1.0f + value;
    }
    if (transform == WeightTransform::deinterleave_rows) deinterleave_rows(data, n_batch, std::int64_t(data.size()) / n_batch, 1);
    const auto n = static_cast<std::int64_t>(data.size());
    group.tensors.push_back({std::move(name), DType::f32, {n}, to_bytes(data)});
  }
};

}  // namespace

void prepare_weights(const ModelSpec& spec, const std::filesystem::path& checkpoint_dir,
                     const std::function<void(PreparedGroup&&)>& sink) {
  const Checkpoint ckpt = Checkpoint::open(checkpoint_dir, spec.quantization);
  const WeightTable table = architecture_of(spec).weight_table(spec);
  for (const WeightGroup& group : table.groups) {
    GroupBuilder b{ckpt, {group.payload_name, {}}};
    for (const WeightEntry& entry : group.entries) {
      if (entry.kind == WeightKind::vector) {
        b.vector(entry.name, entry.sources, entry.transform, entry.n_batch);
      } else if (entry.mxfp4) {
        b.mxfp4_matrix(entry);
      } else {
        b.matrix(entry.name, entry.sources, entry.cols);
      }
    }
    sink(std::move(b.group));
  }
}

namespace {

struct RuntimeLoader {
  const PreparedLookup& lookup;
  helios::Backend& backend;
  LoadedWeights& weights;
  std::int64_t max_fp8_cols = 0;  // the largest k of the matrices kept as FP8

  helios::Tensor upload(std::span<const std::byte> bytes, DType dtype, std::int64_t rows, std::int64_t cols) {
    auto buffer = backend.allocate(bytes.size());
    backend.upload(*buffer, 0, bytes.data(), bytes.size());
    helios::Tensor tensor = helios::Tensor::of(*buffer, dtype, rows, cols);
    weights.own(std::move(buffer));
    return tensor;
  }

  // A projection matrix [rows, cols], or a stack of n_batch matrices [rows / n_batch, cols] (experts):
  // BF16, or FP8 with block scales. A backend that keeps FP8 weights (supports_fp8_weights; for
  // stacks supports_fp8_experts) gets them as stored, a stack's scales a stack too; another gets them
  // dequantized to BF16, as a BF16 package holds them.
  helios::Tensor matrix(const std::string& name, std::int64_t rows, std::int64_t cols, helios::QuantizedWeight& scales,
                        std::int32_t n_batch) {
    PreparedTensorRef ref;
    if (!lookup(name, ref)) fail_input("package weights: tensor '{}' is missing", name);
    if (ref.dtype != DType::f8_e4m3) return as_stack(load(name, DType::bf16, {rows, cols}), n_batch);
    PreparedTensorRef block_ref;
    if (!lookup(name + ".scale_block", block_ref)) fail_input("package weights: FP8 tensor '{}' has no scale block", name);
    check(name + ".scale_block", block_ref, DType::i32, {2});
    std::int32_t block[2];
    std::memcpy(block, block_ref.bytes.data(), sizeof block);
    if (block[0] < 1 || block[1] < 1)
      fail_input("package weights: tensor '{}' has blocks of {} x {}", name, block[0], block[1]);
    const std::int64_t scale_rows = (rows + block[0] - 1) / block[0], scale_cols = (cols + block[1] - 1) / block[1];
    PreparedTensorRef scale_ref;
    if (!lookup(name + ".scales", scale_ref)) fail_input("package weights: FP8 tensor '{}' has no scales", name);
    check(name + ".scales", scale_ref, DType::f32, {scale_rows, scale_cols});
    check(name, ref, DType::f8_e4m3, {rows, cols});
    const auto* values = reinterpret_cast<const std::uint8_t*>(ref.bytes.data());
    std::vector<float> scale_values(std::size_t(scale_rows * scale_cols));
    std::memcpy(scale_values.data(), scale_ref.bytes.data(), scale_ref.bytes.size());
    // Blocks spanning whole rows (a per-tensor scale) are one scale per row to the backend: the
    // same values in the layout per-channel checkpoints have.
    std::int64_t block_rows = block[0], block_cols = block[1];
    if (block_cols >= cols && block_rows > 1) {
      std::vector<float> per_row(static_cast<std::size_t>(rows));
      for (std::int64_t r = 0; r < rows; ++r) per_row[std::size_t(r)] = scale_values[std::size_t(r / block_rows)];
      scale_values = std::move(per_row);
      block_rows = 1;
    }
    // A stack keeps FP8 only where each matrix's rows are whole blocks (its scales its own).
    const std::int64_t matrix_rows = rows / std::max<std::int32_t>(n_batch, 1);
    const bool keep_fp8 =
        n_batch <= 1 ? backend.supports_fp8_weights(rows, cols, std::int32_t(block_rows), std::int32_t(block_cols))
                     : matrix_rows % block_rows == 0 &&
                           backend.supports_fp8_experts(matrix_rows, cols, std::int32_t(block_rows),
                                                        std::int32_t(block_cols));
    if (!keep_fp8) {
      const std::vector<std::uint16_t> bf16 =
          fp8_dequantize_bf16(values, scale_values.data(), rows, cols, block_rows, block_cols);
      return as_stack(upload(std::as_bytes(std::span(bf16)), DType::bf16, rows, cols), n_batch);
    }
    scales.format = helios::QuantizedWeight::Format::fp8_e4m3;
    scales.block_rows = std::int32_t(block_rows);
    scales.block_cols = std::int32_t(block_cols);
    scales.scales = as_stack(upload(std::as_bytes(std::span(scale_values)), DType::f32,
                                    (rows + block_rows - 1) / block_rows, (cols + block_cols - 1) / block_cols),
                             n_batch);
    if (n_batch <= 1) max_fp8_cols = std::max(max_fp8_cols, cols);  // linear_fp8's; experts need nothing
    return as_stack(upload(ref.bytes, DType::f8_e4m3, rows, cols), n_batch);
  }

  void check(const std::string& name, const PreparedTensorRef& ref, DType dtype, const std::vector<std::int64_t>& shape) {
    if (ref.dtype != dtype || ref.shape != shape)
      fail_input("package weights: tensor '{}' has {} [{}], expected {} [{}]", name, helios::dtype_name(ref.dtype),
                 fmt::join(ref.shape, ", "), helios::dtype_name(dtype), fmt::join(shape, ", "));
    std::uint64_t n_elements = 1;
    for (auto dim : shape) n_elements *= static_cast<std::uint64_t>(dim);
    if (ref.bytes.size() != n_elements * helios::dtype_size_bytes(dtype))
      fail_input("package weights: tensor '{}' holds {} bytes, expected {}", name, ref.bytes.size(),
                 n_elements * helios::dtype_size_bytes(dtype));
  }

  // An MXFP4 stack: values U8 [rows, cols / 2] and scales U8 [rows, cols / 32], both as stacks.
  helios::Tensor mxfp4_stack(const WeightEntry& entry, helios::QuantizedWeight& quant) {
    const std::int64_t rows = entry.rows();
    quant.format = helios::QuantizedWeight::Format::mxfp4;
    quant.block_rows = 1;
    quant.block_cols = 32;
    quant.scales = as_stack(load(entry.name + ".scales", DType::u8, {rows, entry.cols / 32}), entry.n_batch);
    return as_stack(load(entry.name, DType::u8, {rows, entry.cols / 2}), entry.n_batch);
  }

  helios::Tensor load(const std::string& name, DType dtype, std::vector<std::int64_t> shape) {
    PreparedTensorRef ref;
    if (!lookup(name, ref)) fail_input("package weights: tensor '{}' is missing", name);
    check(name, ref, dtype, shape);
    const std::int64_t rows = shape.size() == 2 ? shape[0] : 1;
    const std::int64_t cols = shape.size() == 2 ? shape[1] : shape[0];
    return upload(ref.bytes, dtype, rows, cols);
  }
};

}  // namespace

helios::Tensor as_stack(helios::Tensor matrix, std::int32_t n_batch) {
  if (n_batch <= 1) return matrix;
  if (matrix.rows % n_batch != 0)
    fail_input("package weights: a stack of {} matrices cannot have {} rows", n_batch, matrix.rows);
  matrix.rows /= n_batch;
  matrix.n_batch = n_batch;
  matrix.batch_stride = matrix.rows * matrix.stride;
  return matrix;
}

helios::Tensor vector_stack(helios::Tensor vector, std::int32_t n_batch) {
  if (n_batch <= 1) return vector;
  if (vector.rows != 1 || vector.cols % n_batch != 0)
    fail_input("package weights: a stack of {} vectors cannot have {} values", n_batch, vector.rows * vector.cols);
  vector.cols /= n_batch;
  vector.stride = vector.cols;
  vector.n_batch = n_batch;
  vector.batch_stride = vector.cols;
  return vector;
}

LoadedWeights weights_from_prepared(const ModelSpec& spec, const PreparedLookup& lookup, helios::Backend& backend) {
  LoadedWeights weights;
  RuntimeLoader loader{lookup, backend, weights};
  const WeightTable table = architecture_of(spec).weight_table(spec);
  for (const WeightGroup& group : table.groups) {
    for (const WeightEntry& entry : group.entries) {
      Weight weight;
      switch (entry.kind) {
        case WeightKind::projection:
          if (entry.mxfp4) {
            weight.values = loader.mxfp4_stack(entry, weight.quant);
            break;
          }
          weight.values = loader.matrix(entry.name, entry.rows(), entry.cols, weight.quant, entry.n_batch);
          break;
        case WeightKind::table:
          weight.values = loader.load(entry.name, DType::bf16, {entry.rows(), entry.cols});
          break;
        case WeightKind::vector:
          weight.values = vector_stack(loader.load(entry.name, DType::f32, {entry.rows()}), entry.n_batch);
          break;
      }
      weights.add(entry.name, weight);
    }
  }
  for (const auto& [alias, target] : table.aliases) weights.add(alias, weights.at(target));
  if (loader.max_fp8_cols > 0) backend.reserve_fp8_linear(loader.max_fp8_cols);
  return weights;
}

}  // namespace flare::model
