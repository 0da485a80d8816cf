// The CPU backend: the reference implementation of the backend interface (backend.h). Host memory
// is "device" memory, operations run synchronously on a fork-join thread pool (all cores by
// default), activations are F32, weights BF16 with FP32 accumulation, KV pages BF16, FP8 E4M3 or F32.
// It runs every model the CUDA backend runs and is what the CUDA backend's results are checked against.
#pragma once

#include <memory>
#include <vector>

#include "helios/backend.h"
#include "helios/cpu/thread_pool.h"

namespace flare::helios::cpu {

// begin_step's expansion of the step descriptor, per token and per row.
struct StepContext {
  Step step;
  std::vector<std::int32_t> token_row;       // [n_tokens] row of each token
  std::vector<std::int32_t> token_position;  // [n_tokens]
  std::vector<std::int32_t> logit_tokens;    // [n_logit_rows] token index of each logits row
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int n_threads = 0);  // 0: one thread per hardware thread
  std::string_view name() const override { return "cpu"; }
  DType activation_dtype() const override { return DType::f32; }
  int n_threads() const { return pool_.n_threads(); }

  std::unique_ptr<Buffer> allocate(std::size_t size_bytes) override;
  void upload(Buffer& dst, std::size_t offset_bytes, const void* src, std::size_t size_bytes) override;
  void download(const Buffer& src, std::size_t offset_bytes, void* dst, std::size_t size_bytes) override;
  void synchronize() override {}
  void kv_copy_pages(KvCache& cache, std::span<const PageCopy> copies) override;
  // Tests: KV caches reserved from now on commit memory as a device does, in granules of
  // `granule_bytes`, and refuse commits past `limit_bytes` in all (0: no limit). Bytes never
  // committed hold 0xff (NaN in every KV dtype), so a kernel that reads an unbacked page shows.
  void emulate_kv_commits(std::size_t granule_bytes, std::size_t limit_bytes);
  std::size_t emulated_committed_bytes() const { return committed_bytes_; }

  using Backend::begin_step;
  void begin_step(const Step& step, std::span<const KvCache* const> caches) override;
  void embedding(const Tensor& table, Tensor out) override;
  void rms_norm(const Tensor& x, Tensor* residual, const Tensor& weight, float eps, Tensor out) override;
  void head_rms_norm(Tensor x, std::int32_t head_dim, const Tensor& weight, float eps) override;
  void linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor out) override;
  void rotary(Tensor q, Tensor k, std::int32_t head_dim, const RotaryParams& rope) override;
  void kv_store(KvCache& cache, std::int32_t layer, const Tensor& k, const Tensor& v) override;
  void attention(const KvCache& cache, const Tensor& q, const AttentionParams& params, Tensor out) override;
  void swiglu(const Tensor& gate_up, Tensor out) override;
  void geglu(const Tensor& gate_up, Tensor out) override;
  void soft_cap(Tensor x, float cap) override;
  void scale(Tensor x, float factor) override;
  void gather_logit_rows(const Tensor& x, Tensor out) override;
  // Mixture of experts (moe.cpp): the pairs of each expert gathered and multiplied as one GEMM;
  // MXFP4 and FP8 expert stacks (any block shape) decoded to BF16 an expert at a time.
  bool supports_fp8_experts(std::int64_t, std::int64_t, std::int32_t block_rows, std::int32_t block_cols) override {
    return block_rows > 0 && block_cols > 0;
  }
  void router_topk(const Tensor& logits, const RouterParams& params, Tensor ids, Tensor weights) override;
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeExperts& experts,
                   const MoeScratch& scratch, Tensor out) override;

 private:
  ThreadPool pool_;
  StepContext ctx_;

  std::unique_ptr<Buffer> reserve_address_space(std::size_t size_bytes) override;
  std::size_t commit_granularity_bytes() const override { return granule_bytes_; }
  bool commit(Buffer& reserved, std::size_t offset_bytes, std::size_t size_bytes) override;
  void decommit(Buffer& reserved, std::size_t offset_bytes, std::size_t size_bytes) override;
  bool emulate_commits_ = false;
  std::size_t granule_bytes_ = 0;  // 0: KV caches are one allocation
  std::size_t commit_limit_bytes_ = 0;
  std::size_t committed_bytes_ = 0;  // by every emulated commit
};

// Paged attention and KV stores (cpu/attention.cpp).
void cpu_kv_store(ThreadPool& pool, const StepContext& ctx, KvCache& cache, std::int32_t layer, const Tensor& k,
                  const Tensor& v);
void cpu_attention(ThreadPool& pool, const StepContext& ctx, const KvCache& cache, const Tensor& q,
                   const AttentionParams& params, Tensor out);

}  // namespace flare::helios::cpu
