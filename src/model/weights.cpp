// Loads a dense decoder's weights from a checkpoint onto a backend (see model.h): matrices become
// BF16 (q/k/v and gate/up fused row-wise so each is one GEMM), norm weights and biases F32. Every
// expected tensor must be present with the expected shape; tied embeddings reuse the embedding.
#include <fmt/format.h>

#include "model/checkpoint.h"
#include "model/model.h"

namespace flare::model {
namespace {

using helios::DType;
using helios::Tensor;

struct Loader {
  const ModelSpec& spec;
  const Checkpoint& ckpt;
  helios::Backend& backend;
  Weights& weights;

  template <typename T>
  Tensor upload(const std::vector<T>& data, DType dtype, std::int64_t rows, std::int64_t cols) {
    auto buffer = backend.allocate(data.size() * sizeof(T));
    backend.upload(*buffer, 0, data.data(), data.size() * sizeof(T));
    Tensor t = Tensor::of(*buffer, dtype, rows, cols);
    weights.buffers.push_back(std::move(buffer));
    return t;
  }

  Tensor matrix(const std::vector<std::string>& names, const std::vector<std::int64_t>& rows, std::int64_t cols) {
    std::vector<std::uint16_t> data;
    std::int64_t n_rows = 0;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const auto part = ckpt.read_bf16(names[i], {rows[i], cols});
      data.insert(data.end(), part.begin(), part.end());
      n_rows += rows[i];
    }
    return upload(data, DType::bf16, n_rows, cols);
  }

  Tensor vector(const std::vector<std::string>& names, const std::vector<std::int64_t>& sizes) {
    std::vector<float> data;
    for (std::size_t i = 0; i < names.size(); ++i) {
      const auto part = ckpt.read_f32(names[i], {sizes[i]});
      data.insert(data.end(), part.begin(), part.end());
    }
    return upload(data, DType::f32, 1, std::int64_t(data.size()));
  }

  LayerWeights layer(std::int32_t index) {
    const WeightNames& n = spec.names;
    const std::string p = fmt::format(fmt::runtime(n.layer), index);
    const std::int64_t h = spec.hidden_size, q = spec.q_width(), kv = spec.kv_width(), i = spec.intermediate_size;
    LayerWeights w;
    w.input_norm = vector({p + n.input_norm}, {h});
    w.post_norm = vector({p + n.post_norm}, {h});
    w.qkv = matrix({p + n.q + ".weight", p + n.k + ".weight", p + n.v + ".weight"}, {q, kv, kv}, h);
    if (spec.qkv_bias) w.qkv_bias = vector({p + n.q + ".bias", p + n.k + ".bias", p + n.v + ".bias"}, {q, kv, kv});
    w.o = matrix({p + n.o + ".weight"}, {h}, q);
    if (spec.o_bias) w.o_bias = vector({p + n.o + ".bias"}, {h});
    if (spec.qk_norm) {
      w.q_norm = vector({p + n.q_norm}, {spec.head_dim});
      w.k_norm = vector({p + n.k_norm}, {spec.head_dim});
    }
    w.gate_up = matrix({p + n.gate, p + n.up}, {i, i}, h);
    w.down = matrix({p + n.down}, {h}, i);
    return w;
  }
};

}  // namespace

Weights weights_load(const ModelSpec& spec, const std::filesystem::path& dir, helios::Backend& backend) {
  const Checkpoint ckpt = Checkpoint::open(dir);
  Weights weights;
  Loader loader{spec, ckpt, backend, weights};
  const std::int64_t vocab = spec.vocab_size, h = spec.hidden_size;
  weights.embed = loader.matrix({spec.names.embed}, {vocab}, h);
  weights.final_norm = loader.vector({spec.names.final_norm}, {h});
  // Tied checkpoints usually omit lm_head; some store a copy, which we then ignore.
  weights.lm_head = spec.tie_word_embeddings ? weights.embed : loader.matrix({spec.names.lm_head}, {vocab}, h);
  for (std::int32_t layer = 0; layer < spec.n_layers; ++layer) weights.layers.push_back(loader.layer(layer));
  return weights;
}

}  // namespace flare::model
