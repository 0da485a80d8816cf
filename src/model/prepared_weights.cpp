#include "model/prepared_weights.h"

#include <algorithm>
#include <cstring>
#include <span>

#include <fmt/format.h>

#include "common/error.h"
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

struct GroupBuilder {
  const Checkpoint& ckpt;
  PreparedGroup group;

  // A matrix from its row-stacked parts: FP8 as stored (with its scales) when every part is FP8 and
  // their scales stack (fp8_stack), else BF16.
  void matrix(std::string name, const std::vector<std::string>& sources, const std::vector<std::int64_t>& rows,
              std::int64_t cols) {
    bool all_fp8 = true;
    for (const std::string& source : sources) all_fp8 = all_fp8 && ckpt.is_fp8(source);
    if (all_fp8) {
      std::vector<Fp8Matrix> parts;
      for (std::size_t i = 0; i < sources.size(); ++i) parts.push_back(ckpt.read_fp8(sources[i], {rows[i], cols}));
      Fp8Matrix stacked;
      if (fp8_stack(parts, stacked)) return fp8_matrix(std::move(name), stacked);
    }
    std::vector<std::uint16_t> data;
    std::int64_t n_rows = 0;
    for (std::size_t i = 0; i < sources.size(); ++i) {
      const auto part = ckpt.read_bf16(sources[i], {rows[i], cols});
      data.insert(data.end(), part.begin(), part.end());
      n_rows += rows[i];
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

  void vector(std::string name, const std::vector<std::string>& sources, const std::vector<std::int64_t>& sizes) {
    std::vector<float> data;
    for (std::size_t i = 0; i < sources.size(); ++i) {
      const auto part = ckpt.read_f32(sources[i], {sizes[i]});
      data.insert(data.end(), part.begin(), part.end());
    }
    const auto n = static_cast<std::int64_t>(data.size());
    group.tensors.push_back({std::move(name), DType::f32, {n}, to_bytes(data)});
  }
};

// The prepared tensors of one layer, in the order the runtime expects them.
struct LayerShapes {
  std::int64_t h, q, kv, inter, head_dim;
};

LayerShapes layer_shapes(const ModelSpec& spec) {
  return {spec.hidden_size, spec.q_width(), spec.kv_width(), spec.intermediate_size, spec.head_dim};
}

}  // namespace

void prepare_weights(const ModelSpec& spec, const std::filesystem::path& checkpoint_dir,
                     const std::function<void(PreparedGroup&&)>& sink) {
  const Checkpoint ckpt = Checkpoint::open(checkpoint_dir, spec.quantization);
  const WeightNames& n = spec.names;
  const std::int64_t vocab = spec.vocab_size, h = spec.hidden_size;
  {
    GroupBuilder embedding{ckpt, {"weights/embedding", {}}};
    embedding.matrix("embed", {n.embed}, {vocab}, h);
    embedding.vector("final_norm", {n.final_norm}, {h});
    if (!spec.tie_word_embeddings) embedding.matrix("lm_head", {n.lm_head}, {vocab}, h);
    sink(std::move(embedding.group));
  }
  const LayerShapes s = layer_shapes(spec);
  for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
    const std::string p = fmt::format(fmt::runtime(n.layer), layer);
    const std::string t = fmt::format("layers.{}.", layer);
    GroupBuilder b{ckpt, {fmt::format("weights/layer-{:03}", layer), {}}};
    b.vector(t + "input_norm", {p + n.input_norm}, {s.h});
    b.matrix(t + "qkv", {p + n.q + ".weight", p + n.k + ".weight", p + n.v + ".weight"}, {s.q, s.kv, s.kv}, s.h);
    if (spec.qkv_bias) b.vector(t + "qkv_bias", {p + n.q + ".bias", p + n.k + ".bias", p + n.v + ".bias"}, {s.q, s.kv, s.kv});
    b.matrix(t + "o", {p + n.o + ".weight"}, {s.h}, s.q);
    if (spec.o_bias) b.vector(t + "o_bias", {p + n.o + ".bias"}, {s.h});
    if (spec.qk_norm) {
      b.vector(t + "q_norm", {p + n.q_norm}, {s.head_dim});
      b.vector(t + "k_norm", {p + n.k_norm}, {s.head_dim});
    }
    b.vector(t + "post_norm", {p + n.post_norm}, {s.h});
    b.matrix(t + "gate_up", {p + n.gate, p + n.up}, {s.inter, s.inter}, s.h);
    b.matrix(t + "down", {p + n.down}, {s.h}, s.inter);
    sink(std::move(b.group));
  }
}

namespace {

struct RuntimeLoader {
  const PreparedLookup& lookup;
  helios::Backend& backend;
  Weights& weights;
  std::int64_t max_fp8_cols = 0;  // the largest k of the matrices kept as FP8

  helios::Tensor upload(std::span<const std::byte> bytes, DType dtype, std::int64_t rows, std::int64_t cols) {
    auto buffer = backend.allocate(bytes.size());
    backend.upload(*buffer, 0, bytes.data(), bytes.size());
    helios::Tensor tensor = helios::Tensor::of(*buffer, dtype, rows, cols);
    weights.buffers.push_back(std::move(buffer));
    return tensor;
  }

  // A projection matrix [rows, cols]: BF16, or FP8 with block scales. A backend that keeps FP8
  // weights gets them as stored; another gets them dequantized to BF16, as a BF16 package holds them.
  helios::Tensor matrix(const std::string& name, std::int64_t rows, std::int64_t cols, helios::WeightScales& scales) {
    PreparedTensorRef ref;
    if (!lookup(name, ref)) fail_input("package weights: tensor '{}' is missing", name);
    if (ref.dtype != DType::f8_e4m3) return load(name, DType::bf16, {rows, cols});
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
    if (!backend.supports_fp8_weights(rows, cols, std::int32_t(block_rows), std::int32_t(block_cols))) {
      const std::vector<std::uint16_t> bf16 =
          fp8_dequantize_bf16(values, scale_values.data(), rows, cols, block_rows, block_cols);
      return upload(std::as_bytes(std::span(bf16)), DType::bf16, rows, cols);
    }
    scales.block_rows = std::int32_t(block_rows);
    scales.block_cols = std::int32_t(block_cols);
    scales.scales = upload(std::as_bytes(std::span(scale_values)), DType::f32, (rows + block_rows - 1) / block_rows,
                           (cols + block_cols - 1) / block_cols);
    max_fp8_cols = std::max(max_fp8_cols, cols);
    return upload(ref.bytes, DType::f8_e4m3, rows, cols);
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

Weights weights_from_prepared(const ModelSpec& spec, const PreparedLookup& lookup, helios::Backend& backend) {
  Weights weights;
  RuntimeLoader loader{lookup, backend, weights};
  const std::int64_t vocab = spec.vocab_size, h = spec.hidden_size;
  weights.embed = loader.load("embed", DType::bf16, {vocab, h});
  weights.final_norm = loader.load("final_norm", DType::f32, {h});
  weights.lm_head = spec.tie_word_embeddings ? weights.embed : loader.load("lm_head", DType::bf16, {vocab, h});
  const LayerShapes s = layer_shapes(spec);
  for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) {
    const std::string t = fmt::format("layers.{}.", layer);
    LayerWeights w;
    w.input_norm = loader.load(t + "input_norm", DType::f32, {s.h});
    w.qkv = loader.matrix(t + "qkv", s.q + 2 * s.kv, s.h, w.qkv_scales);
    if (spec.qkv_bias) w.qkv_bias = loader.load(t + "qkv_bias", DType::f32, {s.q + 2 * s.kv});
    w.o = loader.matrix(t + "o", s.h, s.q, w.o_scales);
    if (spec.o_bias) w.o_bias = loader.load(t + "o_bias", DType::f32, {s.h});
    if (spec.qk_norm) {
      w.q_norm = loader.load(t + "q_norm", DType::f32, {s.head_dim});
      w.k_norm = loader.load(t + "k_norm", DType::f32, {s.head_dim});
    }
    w.post_norm = loader.load(t + "post_norm", DType::f32, {s.h});
    w.gate_up = loader.matrix(t + "gate_up", 2 * s.inter, s.h, w.gate_up_scales);
    w.down = loader.matrix(t + "down", s.h, s.inter, w.down_scales);
    weights.layers.push_back(std::move(w));
  }
  if (loader.max_fp8_cols > 0) backend.reserve_fp8_linear(loader.max_fp8_cols);
  return weights;
}

}  // namespace flare::model
