// The backend interface (DESIGN.md section 6): device memory, copies, the operations a dense decoder
// layer needs, and the step context they read. Model families (src/model) write their forward pass
// once against this interface; the CPU backend (cpu/) and the CUDA backend (cuda/) implement it.
//
// Contract, chosen so that a CUDA backend can capture a step into a graph and replay it:
// - Every operation is enqueued on the backend's one stream (implied) and may run asynchronously;
//   download() and synchronize() are the only points where the host waits.
// - Tensors are views of device memory (Buffer); operations never allocate.
// - Per-step inputs (tokens, positions, block tables, logits rows) live in device buffers that
//   begin_step() fills; operations read them from there, so a replay changes only those buffers.
// Activation tensors are F32 on the CPU backend (BF16 on CUDA); weights are BF16 (norm weights and
// biases F32); logits are always F32. Thread ownership: one engine thread per device owns a Backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include <vector>

#include "helios/dtype.h"
#include "helios/sampling.h"
#include "helios/step.h"

namespace flare::helios {

// A block of device memory owned by a backend.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* data() const = 0;  // device address (a host address on the CPU backend)
  virtual std::size_t size_bytes() const = 0;
};

// A row-major view of rows x cols elements, `stride` elements between row starts (>= cols), with
// an optional leading batch dimension (a stack of experts): n_batch matrices, batch_stride elements
// apart. Operations take 2-D views (n_batch 1) unless they say otherwise.
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t stride = 0;
  std::int64_t n_batch = 1;
  std::int64_t batch_stride = 0;

  static Tensor of(const Buffer& buffer, DType dtype, std::int64_t rows, std::int64_t cols);
  // [n_batch, rows, cols], densely packed.
  static Tensor of_batched(const Buffer& buffer, DType dtype, std::int64_t n_batch, std::int64_t rows,
                           std::int64_t cols);
  std::size_t size_bytes() const {
    return std::size_t(n_batch > 1 ? n_batch * batch_stride : rows * stride) * dtype_size_bytes(dtype);
  }
  bool empty() const { return data == nullptr; }
  Tensor slice_cols(std::int64_t begin, std::int64_t n) const;  // a column range, same rows
  Tensor slice_rows(std::int64_t begin, std::int64_t n) const;
  Tensor batch(std::int64_t index) const;  // the index-th matrix, 2-D
};

// How a weight's stored values stand for real ones (none: the values are the weight, BF16 or F32).
// MXFP4 [n, k] (an expert stack's matrices): values u8 [n, k / 2], two E2M1 values a byte (element
// 2j in the low nibble), scales u8 [n, k / 32], one E8M0 exponent per 32 values along k: element
// (i, j) stands for e2m1(i, j) * 2^(scales[i][j / 32] - 127) (OCP microscaling).
// FP8 E4M3 [n, k]: element (i, j) stands for e4m3(i, j) * scales[i / block_rows][j / block_cols],
// scales f32 [ceil(n / block_rows), ceil(k / block_cols)]; a per-tensor scale is one block of the
// whole matrix, per-channel scales a block per row.
struct QuantizedWeight {
  enum class Format : std::uint8_t { none, fp8_e4m3, mxfp4 };
  Format format = Format::none;
  Tensor scales;
  std::int32_t block_rows = 0, block_cols = 0;
};

// Paged KV storage for every layer: [n_layers][n_pages][2 (k, v)][page_size][n_kv_heads][head_dim].
struct KvCacheLayout {
  std::int32_t n_layers = 0;
  std::int32_t n_pages = 0;
  std::int32_t page_size_tokens = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;
  DType dtype = DType::bf16;  // bf16, f8_e4m3 (per-tensor scale 1), or f32 (CPU reference checks)

  std::size_t page_bytes() const;  // one layer's K and V for one page
  std::size_t size_bytes() const { return page_bytes() * std::size_t(n_pages) * std::size_t(n_layers); }
};

// A KV cache: address space for every page of its layout, at a base that never moves (kernels and
// captured graphs hold it). Memory behind the pages may come on demand (reserve_kv_cache, kv_grow):
// only backed pages may be read or written, i.e. pages [0, backed_pages) of every layer and every
// page from n_growable_pages on (kept backed from the start, e.g. the engine's scratch page).
struct KvCache {
  KvCacheLayout layout;
  std::unique_ptr<Buffer> storage;     // at least layout.size_bytes() of address space
  std::int32_t n_growable_pages = 0;   // pages [0, n) get memory on demand
  std::int32_t backed_pages = 0;       // of those, [0, backed_pages) have it
  std::size_t granule_bytes = 0;       // the unit memory is committed in; 0: one allocation, all backed
  std::int32_t group = 0;              // the history group it stores: which of a step's block tables
                                       // (Step::table) holds its page ids
};

class KvGranules;        // kv_backing.h
struct KvBackingState;

struct PageCopy {
  std::int32_t src_page = 0;
  std::int32_t dst_page = 0;
  std::int32_t group = 0;  // the history group whose pages these are (KvCache::group)
};

// Rotary embedding of one step: inverse frequencies per row (dynamic scaling changes them with
// the sequence length) or one row shared by all, times an attention factor (YaRN).
struct RotaryParams {
  Tensor inv_freq;  // [1 or n_rows, rotary_dim / 2] f32
  float attention_factor = 1.0f;
};

// Per-head RMSNorm of q and k before the rotation (Qwen3), as head_rms_norm with each weight.
struct QkNormParams {
  Tensor q_weight;  // [1, head_dim] f32
  Tensor k_weight;  // [1, head_dim] f32
  float eps = 0.0f;
};

struct AttentionParams {
  std::int32_t layer = 0;
  std::int32_t n_heads = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;
  float scale = 1.0f;                // softmax scale, usually 1/sqrt(head_dim)
  std::int32_t sliding_window = 0;   // 0: full causal; W: a token sees the last W positions
  // [1, n_heads] f32: one learned logit per head that joins every softmax's denominator and
  // attends to nothing (gpt-oss's attention sinks); empty: none.
  Tensor sinks;
};

// Mixture-of-experts routing (router_topk): per token, a softmax over its router logits, the
// top_k most probable experts (ties to the lower index, as torch.topk), and their weights: the
// probabilities, divided by their sum when `renormalize` (which equals a softmax over the chosen
// logits: Mixtral, gpt-oss, Qwen3-MoE with norm_topk_prob).
struct RouterParams {
  std::int32_t top_k = 0;
  bool renormalize = true;
};

// The gated activation between an MLP's gate_up and down projections.
enum class GatedActivation : std::uint8_t {
  silu,         // silu(gate) * up (SwiGLU)
  gelu_tanh,    // gelu_tanh(gate) * up (GeGLU)
  clamped_silu, // gpt-oss: g = min(gate, L), u = clamp(up, -L, L), (u + 1) * g * sigmoid(alpha * g)
};

// One mixture-of-experts MLP's expert stacks: BF16, MXFP4 where the quant says so (values u8
// stacks of half the columns, scales u8 stacks of a 32nd of them), or FP8 E4M3 with block scales
// (values f8_e4m3 stacks of the same shape, scales f32 stacks [E][ceil(rows / block_rows),
// ceil(cols / block_cols)]; a backend takes them where supports_fp8_experts says so).
struct MoeExperts {
  Tensor gate_up;  // [n_experts][2 * inter, hidden] bf16: each expert's gate rows, then its up rows
  Tensor down;     // [n_experts][hidden, inter] bf16
  QuantizedWeight gate_up_quant, down_quant;
  Tensor gate_up_bias;  // [n_experts][1, 2 * inter] f32, or empty
  Tensor down_bias;     // [n_experts][1, hidden] f32, or empty
  GatedActivation activation = GatedActivation::silu;
  float clamp_limit = 7.0f, clamp_alpha = 1.702f;  // clamped_silu
};

// Scratch rows of one moe_experts call, one per (token, slot) pair, [n_tokens * top_k, ...] of the
// activation dtype. A backend that fuses the steps may leave them unwritten.
struct MoeScratch {
  Tensor gate_up;     // [n_tokens * top_k, 2 * inter]
  Tensor act;         // [n_tokens * top_k, inter]
  Tensor expert_out;  // [n_tokens * top_k, hidden]
};

// One logits row's sampling request: its parameters, the request's tokens so far (penalties), and
// the index of the token being generated (the counter of the seeded draw).
struct SampleRequest {
  const SamplingParams* params = nullptr;
  TokenHistory history;
  std::uint64_t output_index = 0;
};

// A recording of the operations one step enqueues (a CUDA graph), replayable on the backend that
// captured it with Backend::replay.
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  virtual std::size_t n_nodes() const = 0;  // operations recorded
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual DType activation_dtype() const = 0;
  // Makes the backend usable from the calling thread (a device backend binds its context); the
  // engine thread calls it once before its first step.
  virtual void bind_thread() {}

  // Memory and copies.
  virtual std::unique_ptr<Buffer> allocate(std::size_t size_bytes) = 0;
  virtual void upload(Buffer& dst, std::size_t offset_bytes, const void* src, std::size_t size_bytes) = 0;
  virtual void download(const Buffer& src, std::size_t offset_bytes, void* dst, std::size_t size_bytes) = 0;
  virtual void synchronize() = 0;
  virtual void kv_copy_pages(KvCache& cache, std::span<const PageCopy> copies) = 0;

  // KV caches (backend.cpp). allocate_kv_cache backs every page at once, in one allocation
  // (preparation, benchmarks, tests).
  KvCache allocate_kv_cache(const KvCacheLayout& layout);
  // Reserves address space for every page of `layout` and backs only the pages from n_growable_pages
  // on; kv_grow backs pages [0, n_growable_pages) as they are wanted, so the pool can grow to
  // whatever memory is free later. A capacity error (flare::Error) when even the address space or
  // those first pages cannot be had.
  KvCache reserve_kv_cache(const KvCacheLayout& layout, std::int32_t n_growable_pages);
  // Backs growable pages until at least n_pages_wanted of them are, in chunks of whole allocation
  // granules (at least k_kv_chunk_bytes, at most n_growable_pages); returns cache.backed_pages.
  // When the device has no memory for them it returns fewer than wanted, with nothing half-backed
  // and nothing thrown: the caller treats that as a full pool. Backed pages keep their memory
  // until the cache is destroyed.
  std::int32_t kv_grow(KvCache& cache, std::int32_t n_pages_wanted);

  // Uploads the step descriptor (validated against the caches of every history group, indexed by
  // KvCache::group); the operations below read it, each cache through its group's block tables.
  virtual void begin_step(const Step& step, std::span<const KvCache* const> caches) = 0;
  void begin_step(const Step& step, const KvCache& cache) {
    const KvCache* one = &cache;
    begin_step(step, std::span<const KvCache* const>(&one, 1));
  }
  // Sizes the step descriptor's device arrays for steps of up to these counts (max_blocks: the sum
  // of the rows' n_blocks, in each of n_groups history groups), so that their addresses stay
  // fixed, as captured graphs need. A larger step grows them, which changes graph_generation().
  virtual void reserve_step(std::int32_t /*max_tokens*/, std::int32_t /*max_rows*/, std::int32_t /*max_blocks*/,
                            std::int32_t /*n_groups*/ = 1) {}
  // Copies a per-step input other than the descriptor (a per-row rope table) into `dst`, after
  // begin_step and before the step's operations, the way begin_step uploads the descriptor: a
  // replayed graph reads it from `dst`. `src` may be reused as soon as this returns.
  virtual void upload_step_input(Buffer& dst, std::size_t offset_bytes, const void* src, std::size_t size_bytes) {
    upload(dst, offset_bytes, src, size_bytes);
  }

  // Step graphs. capture() records, without running them, the operations `enqueue` issues: they
  // must read per-step inputs only from device buffers (begin_step, upload_step_input) and must
  // not wait on the host (no download or synchronize) or upload. replay() enqueues the recording
  // again, reading the inputs the latest begin_step uploaded. A backend without graphs (the CPU)
  // answers false to supports_graphs() and fails capture().
  virtual bool supports_graphs() const { return false; }
  // Changes whenever device memory the backend owns and a recording may name (the step arrays,
  // kernel scratch) moves; a graph captured under another generation must be captured again.
  virtual std::uint64_t graph_generation() const { return 0; }
  virtual std::unique_ptr<StepGraph> capture(const std::function<void()>& enqueue);
  virtual void replay(const StepGraph& graph);

  // out[t] = table[token t]                      table [vocab, hidden], out [n_tokens, hidden]
  virtual void embedding(const Tensor& table, Tensor out) = 0;
  // With residual: residual += x, then out = rms_norm(residual) * weight; without: out = rms_norm(x) * weight.
  virtual void rms_norm(const Tensor& x, Tensor* residual, const Tensor& weight, float eps, Tensor out) = 0;
  // The projection that ends a block, the residual add and the next norm as one operation:
  //   delta = x @ weight^T; residual += delta; out = rms_norm(residual) * norm_weight
  // with linear's and rms_norm's numerics (delta rounded to the activation dtype before the add).
  // `delta` [x.rows, weight.rows] is scratch that a backend which fuses the steps may leave
  // unwritten; the default runs linear, then rms_norm.
  virtual void linear_residual_rms_norm(const Tensor& x, const Tensor& weight, Tensor delta, Tensor residual,
                                        const Tensor& norm_weight, float eps, Tensor out);
  // The MLP's gate_up projection and SwiGLU as one operation:
  //   gate_up = x @ weight^T; out = silu(gate) * up
  // with linear's and swiglu's numerics (gate and up rounded to the activation dtype first).
  // `gate_up` [x.rows, weight.rows] is scratch that a backend which fuses the steps may leave
  // unwritten; the default runs linear, then swiglu.
  virtual void linear_swiglu(const Tensor& x, const Tensor& weight, Tensor gate_up, Tensor out);
  // In place, per head of head_dim elements: x = rms_norm(x) * weight[head_dim]  (Qwen3 q/k norm).
  virtual void head_rms_norm(Tensor x, std::int32_t head_dim, const Tensor& weight, float eps) = 0;
  // out = x @ weight^T (+ bias): x [m, k] activations, weight [n, k] bf16, bias [1, n] f32, out [m, n].
  virtual void linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor out) = 0;
  // FP8 weights kept as FP8: whether the backend takes a weight [rows, cols] f8_e4m3 with scales in
  // blocks of block_rows x block_cols (QuantizedWeight) in linear_fp8 (out = x @ dequantized(weight)^T
  // (+ bias), like linear). The loader dequantizes FP8 weights to BF16 where it answers false, so
  // such a backend never sees one in linear_fp8.
  virtual bool supports_fp8_weights(std::int64_t /*rows*/, std::int64_t /*cols*/, std::int32_t /*block_rows*/,
                                    std::int32_t /*block_cols*/) {
    return false;
  }
  virtual void linear_fp8(const Tensor& x, const Tensor& weight, const QuantizedWeight& scales, const Tensor* bias,
                          Tensor out);
  // FP8 expert stacks kept as FP8: whether moe_experts takes a stack of matrices [rows, cols]
  // f8_e4m3 with F32 scales in blocks of block_rows x block_cols (QuantizedWeight, the scales a
  // stack too: each matrix's blocks its own). The loader dequantizes the stacks to BF16 where it
  // answers false.
  virtual bool supports_fp8_experts(std::int64_t /*rows*/, std::int64_t /*cols*/, std::int32_t /*block_rows*/,
                                    std::int32_t /*block_cols*/) {
    return false;
  }
  // Called once the FP8 weights are loaded, before any step, with the largest k among them: the
  // backend loads and sizes what linear_fp8 needs then (nothing may be allocated inside a capture).
  virtual void reserve_fp8_linear(std::int64_t /*max_cols*/) {}
  // Rotates q [n_tokens, n_heads*head_dim] and k [n_tokens, n_kv_heads*head_dim] in place
  // (non-interleaved halves, as HF's rotate_half) at the step's token positions.
  virtual void rotary(Tensor q, Tensor k, std::int32_t head_dim, const RotaryParams& rope) = 0;
  // Writes this step's k and v [n_tokens, n_kv_heads*head_dim] into the layer's pages.
  virtual void kv_store(KvCache& cache, std::int32_t layer, const Tensor& k, const Tensor& v) = 0;
  // The attention block's steps before attention as one operation: head_rms_norm of q and k (when
  // qk_norm is given), rotary(q, k), then kv_store(cache, layer, k, v) of the rotated k. A device
  // backend runs it as one kernel; the default runs the three operations.
  virtual void rotary_kv_store(KvCache& cache, std::int32_t layer, Tensor q, Tensor k, const Tensor& v,
                               std::int32_t head_dim, const RotaryParams& rope, const QkNormParams* qk_norm);
  // Causal attention of q [n_tokens, n_heads*head_dim] over each row's cached positions
  // [0, position] (or the sliding window), GQA by n_heads / n_kv_heads; out like q.
  virtual void attention(const KvCache& cache, const Tensor& q, const AttentionParams& params, Tensor out) = 0;
  // out = silu(gate) * up, gate_up [n_tokens, 2*inter] (gate first), out [n_tokens, inter].
  virtual void swiglu(const Tensor& gate_up, Tensor out) = 0;
  // out = gelu_tanh(gate) * up, shaped as swiglu (Gemma's MLP), with swiglu's numerics (F32 math,
  // one rounding to the activation dtype). gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
  // PyTorch's gelu(approximate="tanh"). geglu, soft_cap and scale fail by default (backend.cpp): a
  // backend without them runs no model that needs them.
  virtual void geglu(const Tensor& gate_up, Tensor out);
  // In place x = cap * tanh(x / cap), x [rows, vocab] f32 logits (Gemma's final logit soft-capping).
  virtual void soft_cap(Tensor x, float cap);
  // In place x *= factor, x [rows, cols] activations (Gemma scales its embeddings by sqrt(hidden)):
  // F32 math, rounded once to the activation dtype.
  virtual void scale(Tensor x, float factor);
  // Mixture of experts (router_topk, moe_experts) fail by default: a backend without them runs no
  // mixture-of-experts model.
  // logits [n_tokens, n_experts] f32 -> ids [n_tokens, top_k] i32 (most probable first) and
  // weights [n_tokens, top_k] f32, as RouterParams says.
  virtual void router_topk(const Tensor& logits, const RouterParams& params, Tensor ids, Tensor weights);
  // out[t] = sum_j weights[t, j] * down[e] @ act(gate_up[e] @ x[t]), e = ids[t, j], for j < top_k
  // (ids.cols): x [n_tokens, hidden] activations, ids and weights as router_topk writes them, out
  // like x (biases, where given, added to each expert's products). Each expert's products have
  // linear's numerics over BF16 weights (MXFP4 decoded; FP8 as bf16(e4m3 * scale)) and the activation
  // swiglu's (rounded to the activation dtype); the weighted sum over the top_k slots is F32, rounded once. Only the
  // experts some token chose are read; a step's launch shapes never depend on the routing (graphs).
  virtual void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeExperts& experts,
                           const MoeScratch& scratch, Tensor out);
  // out[i] = x[i-th token whose logits the step wants], out [n_logit_rows, cols].
  virtual void gather_logit_rows(const Tensor& x, Tensor out) = 0;

  // Samples one token per logits row (logits [n_rows, vocab] F32, one request per row) with the
  // semantics of sampling.h. The default downloads the logits and samples on the host; a device
  // backend samples where the logits are and returns the same tokens.
  virtual std::vector<SampledToken> sample(const Tensor& logits, std::span<const SampleRequest> requests);
  // Sizes what sample() keeps between calls for batches of up to max_rows rows of vocab_size
  // logits, so that no step allocates it later: a device backend calls it before the KV pool
  // takes the free memory and before graphs are captured. The default samples on the host and
  // keeps nothing.
  virtual void reserve_sampling(std::int32_t /*max_rows*/, std::int32_t /*vocab_size*/) {}

 protected:
  // What reserve_kv_cache and kv_grow are built on: address space that commit() puts memory behind,
  // a granule at a time. A granularity of 0 (the default, the CPU) means no such thing: a reserved
  // KV cache is one allocation, every page backed at once.
  virtual std::unique_ptr<Buffer> reserve_address_space(std::size_t size_bytes) { return allocate(size_bytes); }
  virtual std::size_t commit_granularity_bytes() const { return 0; }
  // Puts memory behind [offset, offset + size) of a reserve_address_space buffer (whole granules,
  // none committed yet); false, with nothing committed, when there is no memory for them.
  virtual bool commit(Buffer& /*reserved*/, std::size_t /*offset_bytes*/, std::size_t /*size_bytes*/) { return true; }
  // Takes back the memory of a range exactly as one commit() call committed it.
  virtual void decommit(Buffer& /*reserved*/, std::size_t /*offset_bytes*/, std::size_t /*size_bytes*/) {}

 private:
  // Commits what `to` backs beyond `from`; on a refusal takes back what it committed and says false.
  bool kv_commit(Buffer& storage, const KvGranules& granules, KvBackingState from, KvBackingState to);
};

// Memory comes to a KV cache at least this much at a time: each growth costs a few driver calls per
// layer, which must not become a per-token cost.
inline constexpr std::size_t k_kv_chunk_bytes = std::size_t(64) << 20;

}  // namespace flare::helios
