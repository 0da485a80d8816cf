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
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "helios/backend.h"
#include "model/spec.h"

namespace flare::model {

// Device tensors of one decoder layer; empty tensors are absent (biases, q/k norms).
// Projection matrices are bf16, or f8_e4m3 with block scales (the *_scales fields, empty for bf16)
// on a backend that keeps FP8 weights (Backend::supports_fp8_weights).
struct LayerWeights {
  helios::Tensor input_norm;  // [1, hidden] f32
  helios::Tensor qkv;         // [q + 2 kv, hidden] (q, k, v rows fused)
  helios::Tensor qkv_bias;    // [1, q + 2 kv] f32
  helios::Tensor o;           // [hidden, q]
  helios::Tensor o_bias;      // [1, hidden] f32
  helios::Tensor q_norm;      // [1, head_dim] f32
  helios::Tensor k_norm;      // [1, head_dim] f32
  helios::Tensor post_norm;   // [1, hidden] f32
  helios::Tensor gate_up;     // [2 inter, hidden] (gate rows, then up rows)
  helios::Tensor down;        // [hidden, inter]
  helios::WeightScales qkv_scales, o_scales, gate_up_scales, down_scales;
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

  // Allocates the activation buffers (and the backend's step arrays, for steps whose rows span up
  // to max_blocks pages in all) for the largest step up front, so that every later step up to that
  // size reuses the same device addresses (what a captured CUDA graph needs). Steps grow the
  // buffers on demand otherwise; growing makes the decode graphs recapture on their next use.
  void reserve(std::int32_t max_tokens, std::int32_t max_logit_rows, std::int32_t max_rows, std::int32_t max_blocks = 0);
  // Copies rows [first_row, first_row + n_rows) of the last forward's logits to `out`
  // (n_rows * vocab_size floats).
  void download_logits(std::int32_t first_row, std::int32_t n_rows, std::span<float> out);

  // Decode graphs (decode_graphs.cpp): the step of n_rows rows that each compute one token and
  // want its logits is captured once (Backend::capture) and replayed by forward_logits for every
  // later step of that shape, whatever its tokens, positions and block tables. The capture runs a
  // step of dummy rows at position 0 of `scratch_page`, a page of `cache` no sequence may own (its
  // contents are overwritten), eagerly once and then under capture. False when the backend has no
  // graphs; flare::Error when the capture fails.
  bool capture_decode_graph(std::int32_t n_rows, helios::KvCache& cache, std::int32_t scratch_page);
  // Prefill-chunk graphs (the same file): the step of one row that computes n_tokens tokens and
  // wants the logits of its last n_logits (0 or 1) is captured the same way and replayed for
  // every later step of that shape, at any position and over any pages: the full chunks of a
  // prompt prefilled while no other row runs. The capture's dummy row maps every block to
  // `scratch_page`, so its K and V land there only.
  bool capture_prefill_graph(std::int32_t n_tokens, std::int32_t n_logits, helios::KvCache& cache,
                             std::int32_t scratch_page);
  std::int32_t n_decode_graphs() const { return std::int32_t(decode_graphs_.size()); }
  std::int32_t n_prefill_graphs() const { return std::int32_t(prefill_graphs_.size()); }
  std::size_t n_decode_graph_nodes() const;  // operations recorded over every decode graph
  std::size_t n_prefill_graph_nodes() const;  // and over every prefill-chunk graph
  std::int64_t n_graph_replays() const { return n_graph_replays_; }  // steps run by a graph
  void drop_decode_graphs() {
    decode_graphs_.clear();
    prefill_graphs_.clear();
  }

 private:
  struct Scratch;
  struct CapturedStep {
    std::unique_ptr<helios::StepGraph> graph;
    const void* cache_storage = nullptr;  // the KV cache it reads and writes
    std::int32_t scratch_page = 0;        // for a recapture
    std::uint64_t scratch_generation = 0;  // the activation buffers it uses
    std::uint64_t backend_generation = 0;  // the backend's own buffers (Backend::graph_generation)
    float attention_factor = 1.0f;         // a launch argument, not a device input
  };
  void bind_scratch(std::int32_t n_tokens);
  // The two halves of a step: the uploads of its inputs (descriptor, rope table) that a replay
  // repeats, and the operations that a decode graph records.
  helios::RotaryParams upload_step(const helios::Step& step, const helios::KvCache& cache);
  void enqueue_step(std::int32_t n_logit_rows, helios::KvCache& cache, const helios::RotaryParams& rope);
  helios::RotaryParams rotary_for(const helios::Step& step);
  // The graph that runs `step` on `cache`, recaptured first when the buffers it recorded have
  // moved since; nullptr when the step is not a captured decode or prefill-chunk shape.
  const CapturedStep* graph_for(const helios::Step& step, helios::KvCache& cache);
  // Records `step` (a dummy of the captured shape) as a graph after one eager run.
  CapturedStep capture(const helios::Step& step, helios::KvCache& cache, std::int32_t scratch_page);
  // out = x @ weight^T (+ bias) through linear, or linear_fp8 for an FP8 weight.
  void project(const helios::Tensor& x, const helios::Tensor& weight, const helios::WeightScales& scales,
               const helios::Tensor* bias, helios::Tensor out);
  void attention_block(std::int32_t layer, helios::KvCache& cache, const helios::RotaryParams& rope);
  // x @ weight^T (+ bias), then x_t += it and h_t = rms_norm(x_t) * norm_weight: one backend
  // operation for BF16 weights without a bias (Backend::linear_residual_rms_norm), else the two.
  void project_residual_norm(const helios::Tensor& x, const helios::Tensor& weight, const helios::WeightScales& scales,
                             const helios::Tensor& bias, const helios::Tensor& norm_weight);
  // Ends with the residual add and `next_norm`, the norm of whatever reads x next.
  void mlp_block(std::int32_t layer, const helios::Tensor& next_norm);

  ModelSpec spec_;
  helios::Backend& backend_;
  Weights weights_;
  std::unique_ptr<helios::Buffer> rope_static_;  // [1, head_dim/2] when frequencies do not vary
  float rope_attention_factor_ = 1.0f;
  std::shared_ptr<Scratch> scratch_;
  std::uint64_t scratch_generation_ = 0;  // bumped whenever an activation buffer moves
  std::map<std::int32_t, CapturedStep> decode_graphs_;  // by n_rows
  std::map<std::pair<std::int32_t, std::int32_t>, CapturedStep> prefill_graphs_;  // by (n_tokens, n_logits)
  std::int64_t n_graph_replays_ = 0;
};

// Reads and converts every weight the spec needs from the checkpoint onto the backend.
Weights weights_load(const ModelSpec& spec, const std::filesystem::path& checkpoint_dir, helios::Backend& backend);

}  // namespace flare::model
