#include "model/prepared_weights.h"

#include <cstring>

#include <fmt/format.h>

#include "common/error.h"
#include "model/checkpoint.h"

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

  void matrix(std::string name, const std::vector<std::string>& sources, const std::vector<std::int64_t>& rows,
              std::int64_t cols) {
    std::vector<std::uint16_t> data;
    std::int64_t n_rows = 0;
    for (std::size_t i = 0; i < sources.size(); ++i) {
      const auto part = ckpt.read_bf16(sources[i], {rows[i], cols});
      data.insert(data.end(), part.begin(), part.end());
      n_rows += rows[i];
    }
    group.tensors.push_back({std::move(name), DType::bf16, {n_rows, cols}, to_bytes(data)});
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

  helios::Tensor load(const std::string& name, DType dtype, std::vector<std::int64_t> shape) {
    PreparedTensorRef ref;
    if (!lookup(name, ref)) fail_input("package weights: tensor '{}' is missing", name);
    if (ref.dtype != dtype || ref.shape != shape)
      fail_input("package weights: tensor '{}' has {} [{}], expected {} [{}]", name, helios::dtype_name(ref.dtype),
                 fmt::join(ref.shape, ", "), helios::dtype_name(dtype), fmt::join(shape, ", "));
    std::uint64_t n_elements = 1;
    for (auto dim : shape) n_elements *= static_cast<std::uint64_t>(dim);
    if (ref.bytes.size() != n_elements * helios::dtype_size_bytes(dtype))
      fail_input("package weights: tensor '{}' holds {} bytes, expected {}", name, ref.bytes.size(),
                 n_elements * helios::dtype_size_bytes(dtype));
    auto buffer = backend.allocate(ref.bytes.size());
    backend.upload(*buffer, 0, ref.bytes.data(), ref.bytes.size());
    const std::int64_t rows = shape.size() == 2 ? shape[0] : 1;
    const std::int64_t cols = shape.size() == 2 ? shape[1] : shape[0];
    helios::Tensor tensor = helios::Tensor::of(*buffer, dtype, rows, cols);
    weights.buffers.push_back(std::move(buffer));
    return tensor;
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
    w.qkv = loader.load(t + "qkv", DType::bf16, {s.q + 2 * s.kv, s.h});
    if (spec.qkv_bias) w.qkv_bias = loader.load(t + "qkv_bias", DType::f32, {s.q + 2 * s.kv});
    w.o = loader.load(t + "o", DType::bf16, {s.h, s.q});
    if (spec.o_bias) w.o_bias = loader.load(t + "o_bias", DType::f32, {s.h});
    if (spec.qk_norm) {
      w.q_norm = loader.load(t + "q_norm", DType::f32, {s.head_dim});
      w.k_norm = loader.load(t + "k_norm", DType::f32, {s.head_dim});
    }
    w.post_norm = loader.load(t + "post_norm", DType::f32, {s.h});
    w.gate_up = loader.load(t + "gate_up", DType::bf16, {2 * s.inter, s.h});
    w.down = loader.load(t + "down", DType::bf16, {s.h, s.inter});
    weights.layers.push_back(std::move(w));
  }
  return weights;
}

}  // namespace flare::model
