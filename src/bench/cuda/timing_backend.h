// A Backend that forwards every call to a CUDA backend and, while recording, brackets each
// operation with CUDA events and counts the bytes it moves and the FLOPs it computes, grouped by
// category (GEMMs by weight: qkv, o, gate_up, down, lm_head; attention; norms; rotary; ...). The
// model runs through it unchanged, so the per-operation table times the real forward pass.
// One event is recorded after each operation (and one at begin_step), so consecutive intervals
// cover the whole step: an operation's time includes any wait for the host to launch it.
// Recording must be off while a graph is captured (events would land in the graph).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "bench/bench_report.h"
#include "bench/cuda/event_timer.h"
#include "helios/backend.h"
#include "helios/cuda/cuda_backend.h"

namespace flare::bench::cuda {

class TimingBackend final : public helios::Backend {
 public:
  explicit TimingBackend(helios::cuda::CudaBackend& inner) : inner_(inner) {}
  // Names the GEMMs by their weight: each matrix's role by the address of its values
  // (LoadedWeights::roles_by_address); other weights count as "gemm other".
  void name_weights(std::map<const void*, std::string> roles) { weight_roles_ = std::move(roles); }

  helios::cuda::CudaBackend& inner() { return inner_; }
  // While on, each operation is timed and counted; steps_recorded() counts begin_step calls.
  void set_recording(bool on);
  // Waits for the recorded work and returns per-step rows (totals / recorded steps) with bounds
  // from the device rates; clears the recording.
  std::vector<BreakdownRow> collect(const DeviceRates& rates);

  std::string_view name() const override { return inner_.name(); }
  helios::DType activation_dtype() const override { return inner_.activation_dtype(); }
  std::unique_ptr<helios::Buffer> allocate(std::size_t size_bytes) override { return inner_.allocate(size_bytes); }
  void upload(helios::Buffer& dst, std::size_t offset, const void* src, std::size_t size) override;
  void download(const helios::Buffer& src, std::size_t offset, void* dst, std::size_t size) override {
    inner_.download(src, offset, dst, size);
  }
  void synchronize() override { inner_.synchronize(); }
  void kv_copy_pages(helios::KvCache& cache, std::span<const helios::PageCopy> copies) override {
    inner_.kv_copy_pages(cache, copies);
  }
  using helios::Backend::begin_step;
  void begin_step(const helios::Step& step, std::span<const helios::KvCache* const> caches) override;
  void bind_thread() override { inner_.bind_thread(); }
  void reserve_step(std::int32_t max_tokens, std::int32_t max_rows, std::int32_t max_blocks,
                    std::int32_t n_groups = 1) override {
    inner_.reserve_step(max_tokens, max_rows, max_blocks, n_groups);
  }
  void upload_step_input(helios::Buffer& dst, std::size_t offset, const void* src, std::size_t size) override;
  // Graphs pass straight through: a replay is one timed operation ("graph replay"); the
  // per-operation table is taken with the graphs dropped, so the model runs eagerly.
  bool supports_graphs() const override { return inner_.supports_graphs(); }
  std::uint64_t graph_generation() const override { return inner_.graph_generation(); }
  std::unique_ptr<helios::StepGraph> capture(const std::function<void()>& enqueue) override {
    return inner_.capture(enqueue);
  }
  void replay(const helios::StepGraph& graph) override;
  void embedding(const helios::Tensor& table, helios::Tensor out) override;
  void rms_norm(const helios::Tensor& x, helios::Tensor* residual, const helios::Tensor& weight, float eps,
                helios::Tensor out) override;
  void head_rms_norm(helios::Tensor x, std::int32_t head_dim, const helios::Tensor& weight, float eps) override;
  void linear(const helios::Tensor& x, const helios::Tensor& weight, const helios::Tensor* bias,
              helios::Tensor out) override;
  // Timed as its GEMM's category: the norm it ends with is part of that operation.
  void linear_residual_rms_norm(const helios::Tensor& x, const helios::Tensor& weight, helios::Tensor delta,
                                helios::Tensor residual, const helios::Tensor& norm_weight, float eps,
                                helios::Tensor out) override;
  bool supports_fp8_weights(std::int64_t rows, std::int64_t cols, std::int32_t block_rows,
                            std::int32_t block_cols) override {
    return inner_.supports_fp8_weights(rows, cols, block_rows, block_cols);
  }
  void linear_fp8(const helios::Tensor& x, const helios::Tensor& weight, const helios::QuantizedWeight& scales,
                  const helios::Tensor* bias, helios::Tensor out) override;
  void reserve_fp8_linear(std::int64_t max_cols) override { inner_.reserve_fp8_linear(max_cols); }
  bool supports_fp8_experts(std::int64_t rows, std::int64_t cols, std::int32_t block_rows,
                            std::int32_t block_cols) override {
    return inner_.supports_fp8_experts(rows, cols, block_rows, block_cols);
  }
  void rotary(helios::Tensor q, helios::Tensor k, std::int32_t head_dim, const helios::RotaryParams& rope) override;
  void kv_store(helios::KvCache& cache, std::int32_t layer, const helios::Tensor& k, const helios::Tensor& v) override;
  void rotary_kv_store(helios::KvCache& cache, std::int32_t layer, helios::Tensor q, helios::Tensor k,
                       const helios::Tensor& v, std::int32_t head_dim, const helios::RotaryParams& rope,
                       const helios::QkNormParams* qk_norm) override;
  void attention(const helios::KvCache& cache, const helios::Tensor& q, const helios::AttentionParams& params,
                 helios::Tensor out) override;
  void swiglu(const helios::Tensor& gate_up, helios::Tensor out) override;
  void geglu(const helios::Tensor& gate_up, helios::Tensor out) override;
  void router_topk(const helios::Tensor& logits, const helios::RouterParams& params, helios::Tensor ids,
                   helios::Tensor weights) override;
  // Counts the bytes of the distinct experts n_tokens uniformly routed tokens are expected to touch,
  // E (1 - (1 - k/E)^n): the routing itself stays on the device.
  void moe_experts(const helios::Tensor& x, const helios::Tensor& ids, const helios::Tensor& weights,
                   const helios::MoeExperts& experts, const helios::MoeScratch& scratch, helios::Tensor out) override;
  void soft_cap(helios::Tensor x, float cap) override;
  void scale(helios::Tensor x, float factor) override;
  void linear_swiglu(const helios::Tensor& x, const helios::Tensor& weight, helios::Tensor gate_up,
                     helios::Tensor out) override;
  void gather_logit_rows(const helios::Tensor& x, helios::Tensor out) override;
  std::vector<helios::SampledToken> sample(const helios::Tensor& logits,
                                           std::span<const helios::SampleRequest> requests) override {
    return inner_.sample(logits, requests);
  }

 private:
  struct Totals {
    std::int32_t n_calls = 0;
    double bytes = 0, flops = 0, ms = 0;
  };
  // Records the event that closes the operation just enqueued, charged to `category`.
  void mark(const std::string& category, double bytes, double flops);
  std::string linear_category(const helios::Tensor& weight) const;

  helios::cuda::CudaBackend& inner_;
  std::map<const void*, std::string> weight_roles_;
  bool recording_ = false;
  std::int32_t n_steps_ = 0;
  helios::Step step_;                           // the current step (for attention's bytes)
  std::vector<Event> events_;                   // a pool, reused across collects
  std::size_t n_events_ = 0;                    // events recorded since the last collect
  std::vector<std::string> event_categories_;   // [n_events_] the category each event closes ("" opens a step)
  std::vector<std::string> order_;              // categories in order of first appearance
  std::map<std::string, Totals> totals_;
};

}  // namespace flare::bench::cuda
