// A loaded model on a backend: the API the engine calls.
//
//   helios::cpu::CpuBackend backend;
//   auto model = model::Model::load(checkpoint_dir, backend);        // config.json + safetensors
//   helios::KvCache cache = backend.allocate_kv_cache(model->kv_cache_layout(n_pages, page_size));
//   std::vector<float> logits = model->forward(step, cache);         // [step.n_logit_rows(), vocab] F32
//   helios::sample_token(row_logits, params, history, index);        // helios/sampling.h
//
// The forward pass is written once for every dense family (dense_decoder.cpp) against the backend
// interface; the family registry (families/) only decides flags and weight names. Not thread-safe:
// one engine thread owns a Model, its backend and its caches.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "helios/backend.h"
#include "model/spec.h"

namespace flare::model {

// Device tensors of one decoder layer; empty tensors are absent (biases, q/k norms).
struct LayerWeights {
  helios::Tensor input_norm;  // [1, hidden] f32
  helios::Tensor qkv;         // [q + 2 kv, hidden] bf16 (q, k, v rows fused)
  helios::Tensor qkv_bias;    // [1, q + 2 kv] f32
  helios::Tensor o;           // [hidden, q] bf16
  helios::Tensor o_bias;      // [1, hidden] f32
  helios::Tensor q_norm;      // [1, head_dim] f32
  helios::Tensor k_norm;      // [1, head_dim] f32
  helios::Tensor post_norm;   // [1, hidden] f32
  helios::Tensor gate_up;     // [2 inter, hidden] bf16 (gate rows, then up rows)
  helios::Tensor down;        // [hidden, inter] bf16
};

struct Weights {
  helios::Tensor embed;       // [vocab, hidden] bf16
  helios::Tensor final_norm;  // [1, hidden] f32
  helios::Tensor lm_head;     // [vocab, hidden] bf16 (the embedding itself when tied)
  std::vector<LayerWeights> layers;
  std::vector<std::unique_ptr<helios::Buffer>> buffers;  // owns the memory above
};

class Model {
 public:
  static std::unique_ptr<Model> load(const std::filesystem::path& checkpoint_dir, helios::Backend& backend);
  Model(ModelSpec spec, helios::Backend& backend, Weights weights);

  const ModelSpec& spec() const { return spec_; }
  helios::Backend& backend() { return backend_; }
  helios::KvCacheLayout kv_cache_layout(std::int32_t n_pages, std::int32_t page_size_tokens,
                                        helios::DType dtype = helios::DType::bf16) const;

  // Runs one step over the batch (prefill chunks and decode rows alike) and returns the logits of
  // the tokens the step asks for: [step.n_logit_rows(), vocab_size] F32, row-major, on the host.
  std::vector<float> forward(const helios::Step& step, helios::KvCache& cache);
  // The same, leaving the logits on the device: [step.n_logit_rows(), vocab_size] F32, valid until
  // the next forward. Pair with Backend::sample to sample without copying logits to the host.
  helios::Tensor forward_logits(const helios::Step& step, helios::KvCache& cache);

  // Allocates the activation buffers for the largest step up front, so that every later step up
  // to that size reuses the same device addresses (what a captured CUDA graph needs). Steps grow
  // the buffers on demand otherwise.
  void reserve(std::int32_t max_tokens, std::int32_t max_logit_rows, std::int32_t max_rows);

 private:
  struct Scratch;
  void bind_scratch(std::int32_t n_tokens);
  helios::RotaryParams rotary_for(const helios::Step& step);
  void attention_block(std::int32_t layer, helios::KvCache& cache, const helios::RotaryParams& rope);
  void mlp_block(std::int32_t layer);

  ModelSpec spec_;
  helios::Backend& backend_;
  Weights weights_;
  std::unique_ptr<helios::Buffer> rope_static_;  // [1, head_dim/2] when frequencies do not vary
  float rope_attention_factor_ = 1.0f;
  std::shared_ptr<Scratch> scratch_;
};

// Reads and converts every weight the spec needs from the checkpoint onto the backend.
Weights weights_load(const ModelSpec& spec, const std::filesystem::path& checkpoint_dir, helios::Backend& backend);

}  // namespace flare::model
