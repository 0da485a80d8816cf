// The CUDA backend's KV stores and attention launches (see cuda_backend.h), BF16 or FP8 E4M3 pages.
// attention() picks a kernel per step:
//   - a pure decode step (every row computes one token): split-KV decode on tensor cores
//     (attention_decode.cu), work items of (row, kv head, split) serving the GQA group dealt to
//     about as many CTAs as are resident (attention_decode_plan.h), the last split of each merging
//     the splits' partials;
//   - a step whose rows compute at most 8 tokens each (verify rows: a pending token and its drafts;
//     short prompt chunks; decode rows beside them): the same kernel with the row's tokens folded
//     with the GQA group into the mma columns (QTOK), so each key is read once for all of them;
//   - any other step: the tensor-core flash kernel (attention_prefill.cu) for every token;
//   - head sizes those two do not cover (they take 64, 128 and 256): the plain warp-per-head kernel
//     (attention.cu, BF16 only).
// Attention sinks (AttentionParams::sinks, gpt-oss) are a pointer every kernel takes (null: none).
// The decode grid depends only on the row count, the heads and host-known caps (SM count, cache
// capacity, window, shared memory), never on positions, so a captured decode step replays for any lengths. Its
// split partials and merge counters live in one scratch buffer the backend keeps (grown, never shrunk).
#include <algorithm>

#include "common/error.h"
#include "helios/cuda/attention_decode_plan.h"
#include "helios/cuda/cuda_backend.h"
#include "helios/cuda/tensor_checks.h"

namespace flare::helios::cuda {
namespace {

constexpr float k_log2e = 1.4426950408889634f;
// The decode scratch is first sized for this many rows, so that graphs captured after the first
// decode step (up to that batch) never see it move.
constexpr std::int64_t k_scratch_rows = 1024;

}  // namespace

void CudaBackend::kv_store(KvCache& cache, std::int32_t layer, const Tensor& k, const Tensor& v) {
  const KvCacheLayout& l = cache.layout;
  if (l.dtype != DType::bf16 && l.dtype != DType::f8_e4m3) {
    fail_usage("the CUDA backend stores KV pages as bf16 or f8_e4m3, not {}", dtype_name(l.dtype));
  }
  expect_bf16(k, "kv_store k");
  expect_bf16(v, "kv_store v");
  const std::int64_t width = std::int64_t(l.n_kv_heads) * l.head_dim;
  expect_shape(k, step_.n_tokens(), width, "kv_store k");
  expect_shape(v, step_.n_tokens(), width, "kv_store v");
  if (layer < 0 || layer >= l.n_layers) fail(ExitCode::failure, "internal: kv_store layer {}", layer);
  CUdeviceptr k_ptr = address(k.data), v_ptr = address(v.data), c_ptr = address(cache.storage->data());
  CUdeviceptr p_ptr = arrays_.positions, r_ptr = arrays_.token_rows, fb_ptr = arrays_.row_first_block,
              bt_ptr = block_tables_of(cache);
  long long k_stride = k.stride, v_stride = v.stride;
  int layer_i = layer, n_pages = l.n_pages, page_size = l.page_size_tokens, n_kv = l.n_kv_heads;
  const CUfunction f = function(kv_store_module(l.head_dim, l.dtype), "flare_kv_store");
  launch(f, {.grid_x = unsigned(k.rows), .block_x = 256},
         {&k_ptr, &k_stride, &v_ptr, &v_stride, &c_ptr, &layer_i, &n_pages, &page_size, &n_kv, &p_ptr, &r_ptr, &fb_ptr,
          &bt_ptr},
         "kv_store");
}

void CudaBackend::attention(const KvCache& cache, const Tensor& q, const AttentionParams& p, Tensor out) {
  const KvCacheLayout& l = cache.layout;
  if (l.dtype != DType::bf16 && l.dtype != DType::f8_e4m3) {
    fail_usage("the CUDA backend reads KV pages as bf16 or f8_e4m3, not {}", dtype_name(l.dtype));
  }
  if (p.n_kv_heads != l.n_kv_heads || p.head_dim != l.head_dim || p.n_kv_heads < 1 || p.n_heads % p.n_kv_heads != 0 ||
      p.layer < 0 || p.layer >= l.n_layers) {
    fail(ExitCode::failure, "internal: attention heads {}/{} x {} layer {} against cache {} x {}", p.n_heads,
         p.n_kv_heads, p.head_dim, p.layer, l.n_kv_heads, l.head_dim);
  }
  expect_bf16(q, "attention q");
  expect_bf16(out, "attention output");
  const std::int64_t width = std::int64_t(p.n_heads) * p.head_dim;
  expect_shape(q, step_.n_tokens(), width, "attention q");
  expect_shape(out, step_.n_tokens(), width, "attention output");
  if (!p.sinks.empty()) {
    expect_dtype(p.sinks, DType::f32, "attention sinks");
    expect_shape(p.sinks, 1, p.n_heads, "attention sinks");
  }
  if (step_.n_tokens() == 0) return;
  if (!fast_attention_covers(p.head_dim)) {
    if (l.dtype != DType::bf16) fail_usage("f8_e4m3 KV pages need head size 64, 128 or 256, not {}", p.head_dim);
    return attention_plain(cache, q, p, out);
  }
  // The module and its shared memory: kernel_catalog.h's choices, which the catalog enumerates.
  const int smem = device().max_shared_bytes_per_block;
  if (step_.n_tokens() == step_.n_rows()) {  // one token per row
    return attention_decode(cache, q, p, out,
                            decode_attention(p.n_heads, p.n_kv_heads, p.head_dim, l.page_size_tokens, l.dtype, smem));
  }
  std::int32_t max_row_tokens = 0;
  for (const StepRow& row : step_.rows) max_row_tokens = std::max(max_row_tokens, row.n_tokens);
  const std::optional<DecodeAttention> verify =
      verify_attention(p.n_heads, p.n_kv_heads, p.head_dim, l.page_size_tokens, l.dtype, smem, max_row_tokens);
  if (verify) return attention_decode(cache, q, p, out, *verify);
  attention_prefill(cache, q, p, out);
}

void CudaBackend::attention_decode(const KvCache& cache, const Tensor& q, const AttentionParams& p, Tensor out,
                                   const DecodeAttention& plan) {
  const KvCacheLayout& l = cache.layout;
  const int group_size = p.n_heads / p.n_kv_heads;
  const int heads_per_cta = plan.heads_per_cta;
  const int n_rows = step_.n_rows(), n_tokens = step_.n_tokens();
  // (row, head group) pairs; each splits its keys into n_splits work items.
  const std::int64_t n_groups = std::int64_t(n_rows) * p.n_kv_heads * (group_size / heads_per_cta);
  std::int64_t max_keys = std::int64_t(l.n_pages) * l.page_size_tokens;
  if (p.sliding_window > 0) max_keys = std::min<std::int64_t>(max_keys, p.sliding_window);
  int n_splits = decode_splits(n_groups, device().n_multiprocessors, max_keys);

  // Scratch: the merge counters [n_rows][n_heads] int at a fixed place in front (zero between
  // launches: the merging CTA resets its own), then partials acc [n_tokens][n_heads][n_splits][head_dim]
  // f32 and ml [n_tokens][n_heads][n_splits] float2 (rewritten by every launch).
  const std::size_t n_slots = std::size_t(n_tokens) * std::size_t(p.n_heads) * std::size_t(n_splits);
  const std::size_t acc_bytes = n_slots * std::size_t(p.head_dim) * 4;
  const std::size_t counters_needed = std::size_t(n_rows) * std::size_t(p.n_heads);
  if (n_splits > 1 && (!attention_scratch_ || counters_needed > attention_counters_ ||
                       attention_scratch_->size_bytes() < attention_counters_ * 4 + acc_bytes + n_slots * 8)) {
    // rows x splits <= rows + (items per SM x SMs) for any row count (decode_splits).
    const std::int64_t max_rows = std::max<std::int64_t>(n_rows, k_scratch_rows);
    const std::int64_t max_split_rows = max_rows + std::int64_t(k_decode_items_per_sm) * device().n_multiprocessors;
    const std::size_t max_slots = std::size_t(max_split_rows) * std::size_t(p.n_heads);
    const std::size_t slot_bytes = std::size_t(p.head_dim) * 4 + 8;
    const std::size_t counters = std::max(counters_needed, std::size_t(max_rows) * std::size_t(p.n_heads));
    const std::size_t counters_bytes = (counters * 4 + 255) / 256 * 256;
    const std::size_t size = counters_bytes + std::max(n_slots, max_slots) * slot_bytes;
    stream_.synchronize();  // queued kernels may still use the old buffer
    attention_scratch_ = std::make_unique<DeviceMemory>(size);
    attention_counters_ = counters_bytes / 4;
    check(driver().memset_d8_async(attention_scratch_->address(), 0, counters_bytes, stream_.handle()),
          "cuMemsetD8Async");
    ++graph_generation_;  // graphs that recorded the old buffer must be captured again
  }
  CUdeviceptr counters_ptr = n_splits > 1 ? attention_scratch_->address() : 0;
  CUdeviceptr acc_ptr = n_splits > 1 ? counters_ptr + attention_counters_ * 4 : 0;
  CUdeviceptr ml_ptr = n_splits > 1 ? acc_ptr + acc_bytes : 0;
  CUdeviceptr q_ptr = address(q.data), out_ptr = address(out.data), c_ptr = address(cache.storage->data());
  CUdeviceptr sinks_ptr = p.sinks.empty() ? 0 : address(p.sinks);  // [n_heads] f32, or none
  CUdeviceptr p_ptr = arrays_.positions, fb_ptr = arrays_.row_first_block, ft_ptr = arrays_.row_first_token,
              bt_ptr = block_tables_of(cache);
  long long q_stride = q.stride, out_stride = out.stride;
  int layer = p.layer, n_pages = l.n_pages, n_kv = l.n_kv_heads, n_heads = p.n_heads;
  int window = p.sliding_window, n_rows_arg = n_rows, n_tokens_arg = n_tokens;
  float scale_log2 = p.scale * k_log2e;
  const CUfunction f = function(plan.module, "flare_attention_decode");
  const unsigned smem = plan.smem_bytes;
  // Once per loaded function, not per launch: allow its dynamic ring, then ask how many of its CTAs
  // fit an SM. As many CTAs as are resident at once each work through their share of the items
  // (row, head group, split), the copy ring running on from one item to the next (decode_grid).
  const auto [resident, inserted] = attention_decode_resident_.try_emplace(f, 0);
  if (inserted) {
    check(driver().func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem)),
          "cuFuncSetAttribute");
    check(driver().occupancy_max_active_blocks(&resident->second, f, 128, smem),
          "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  }
  const std::int64_t n_items = n_groups * n_splits;
  const std::int64_t grid = decode_grid(n_items, resident->second, device().n_multiprocessors);
  launch(f, {.grid_x = unsigned(grid), .block_x = 128, .shared_bytes = smem},
         {&q_ptr, &q_stride, &out_ptr, &out_stride, &acc_ptr, &ml_ptr, &c_ptr, &layer, &n_pages, &n_kv, &n_heads,
          &scale_log2, &window, &n_splits, &n_rows_arg, &n_tokens_arg, &p_ptr, &fb_ptr, &ft_ptr, &bt_ptr,
          &counters_ptr, &sinks_ptr},
         "attention_decode", /*early_work=*/true);
}

void CudaBackend::attention_prefill(const KvCache& cache, const Tensor& q, const AttentionParams& p, Tensor out) {
  const KvCacheLayout& l = cache.layout;
  std::int32_t max_row_tokens = 0;
  for (const StepRow& row : step_.rows) max_row_tokens = std::max(max_row_tokens, row.n_tokens);
  CUdeviceptr q_ptr = address(q.data), out_ptr = address(out.data), c_ptr = address(cache.storage->data());
  CUdeviceptr sinks_ptr = p.sinks.empty() ? 0 : address(p.sinks);  // [n_heads] f32, or none
  CUdeviceptr p_ptr = arrays_.positions, r_ptr = arrays_.token_rows, fb_ptr = arrays_.row_first_block,
              bt_ptr = block_tables_of(cache);
  long long q_stride = q.stride, out_stride = out.stride;
  int layer = p.layer, n_pages = l.n_pages, page_size = l.page_size_tokens, n_kv = l.n_kv_heads;
  int n_tokens = int(q.rows), n_heads = p.n_heads, window = p.sliding_window;
  float scale_log2 = p.scale * k_log2e;
  // Throws (usage) where the device cannot give its tiles' shared memory.
  const PrefillAttention plan = prefill_attention(p.head_dim, l.dtype, device().max_shared_bytes_per_block);
  const CUfunction f = function(plan.module, "flare_attention_prefill");
  const int warps = plan.warps;
  const unsigned smem = plan.smem_bytes;
  if (smem > 0 && !attention_prefill_smem_set_.contains(f)) {  // once per loaded function
    check(driver().func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem)),
          "cuFuncSetAttribute");
    attention_prefill_smem_set_.insert(f);
  }
  launch(f,
         {.grid_x = unsigned((max_row_tokens + 16 * warps - 1) / (16 * warps)),
          .grid_y = unsigned(n_heads),
          .grid_z = unsigned(step_.n_rows()),
          .block_x = unsigned(32 * warps),
          .shared_bytes = smem},
         {&q_ptr, &q_stride, &out_ptr, &out_stride, &c_ptr, &layer, &n_pages, &page_size, &n_kv, &n_tokens, &n_heads,
          &scale_log2, &window, &p_ptr, &r_ptr, &fb_ptr, &bt_ptr, &sinks_ptr},
         "attention_prefill");
}

void CudaBackend::attention_plain(const KvCache& cache, const Tensor& q, const AttentionParams& p, Tensor out) {
  const KvCacheLayout& l = cache.layout;
  CUdeviceptr q_ptr = address(q.data), out_ptr = address(out.data), c_ptr = address(cache.storage->data());
  CUdeviceptr sinks_ptr = p.sinks.empty() ? 0 : address(p.sinks);  // [n_heads] f32, or none
  CUdeviceptr p_ptr = arrays_.positions, r_ptr = arrays_.token_rows, fb_ptr = arrays_.row_first_block,
              bt_ptr = block_tables_of(cache);
  long long q_stride = q.stride, out_stride = out.stride;
  int layer = p.layer, n_pages = l.n_pages, page_size = l.page_size_tokens, n_kv = l.n_kv_heads;
  int n_tokens = int(q.rows), n_heads = p.n_heads, window = p.sliding_window;
  float scale = p.scale;
  const std::int64_t n_warps = std::int64_t(n_tokens) * n_heads;
  const CUfunction f = function(plain_attention_module(l.head_dim, l.dtype), "flare_attention");
  launch(f, {.grid_x = unsigned((n_warps + 3) / 4), .block_x = 128},
         {&q_ptr, &q_stride, &out_ptr, &out_stride, &c_ptr, &layer, &n_pages, &page_size, &n_kv, &n_tokens, &n_heads,
          &scale, &window, &p_ptr, &r_ptr, &fb_ptr, &bt_ptr, &sinks_ptr},
         "attention");
}

}  // namespace flare::helios::cuda
