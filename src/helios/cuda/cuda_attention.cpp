// The CUDA backend's KV stores and attention launches (see cuda_backend.h), BF16 or FP8 E4M3 pages.
// attention() picks a kernel per step:
//   - a pure decode step (every row computes one token): split-KV decode on tensor cores
//     (attention_decode.cu), one CTA per (row, kv head, split) serving the GQA group, the last split
//     of each merging the splits' partials;
//   - any other step: the tensor-core flash kernel (attention_prefill.cu) for every token;
//   - head sizes those two do not cover: the plain warp-per-head kernel (attention.cu, BF16 only).
// The decode grid depends only on the row count, the heads and host-known caps (SM count, cache
// capacity, window), never on positions, so a captured decode step replays for any lengths. Its
// split partials and merge counters live in one scratch buffer the backend keeps (grown, never shrunk).
#include <algorithm>

#include "common/error.h"
#include "helios/cuda/cuda_backend.h"
#include "helios/cuda/tensor_checks.h"

namespace flare::helios::cuda {
namespace {

constexpr float k_log2e = 1.4426950408889634f;
constexpr int k_max_decode_splits = 64;            // k_max_splits of attention_decode.cu
constexpr int k_min_keys_per_split = 256;         // fewer keys than this per split is all launch overhead
// The decode grid aims at this many CTAs per SM: about one wave of resident CTAs. More splits
// than that only add partials to merge and pipeline ramps (H200, Llama-3.1-8B shape: 2 against 8
// took the batch-64 step at context 1024 from 7.58 to 7.00 ms and batch 1 from 4.28 to 4.22 ms,
// with 32 x 8k attention unchanged).
constexpr int k_decode_ctas_per_sm = 2;
constexpr int k_max_decode_heads_per_cta = 16;    // GROUP of attention_decode.cu (two mma n-tiles)
constexpr int k_decode_cta_items = 128;           // k_max_cta_items of attention_decode.cu
// The decode scratch is first sized for this many rows, so that graphs captured after the first
// decode step (up to that batch) never see it move.
constexpr std::int64_t k_scratch_rows = 1024;
constexpr int k_prefill_warps = 8;                // k_warps of attention_prefill.cu, 16 query tokens each

bool fast_kernels_cover(std::int32_t head_dim) { return head_dim == 64 || head_dim == 128; }

std::string kv_fp8_define(const KvCacheLayout& l) { return l.dtype == DType::f8_e4m3 ? "1" : "0"; }

// Query heads per decode CTA: the largest divisor of the GQA group that fits the kernel's registers.
int decode_heads_per_cta(int group_size) {
  for (int g = std::min(group_size, k_max_decode_heads_per_cta); g > 1; --g) {
    if (group_size % g == 0) return g;
  }
  return 1;
}

// Splits per (row, kv head): enough CTAs to fill the GPU, no more than the longest possible context
// (the cache's capacity or the window) can feed. Depends on no position, so graphs may capture it.
int decode_splits(std::int64_t n_ctas, int n_sms, std::int64_t max_keys) {
  const std::int64_t wanted = (std::int64_t(k_decode_ctas_per_sm) * n_sms + n_ctas - 1) / n_ctas;
  const std::int64_t useful = (max_keys + k_min_keys_per_split - 1) / k_min_keys_per_split;
  return int(std::clamp<std::int64_t>(std::min(wanted, useful), 1, k_max_decode_splits));
}

// The decode kernel's copy ring for one iteration: the K and V of 64 keys (16 a warp), whatever
// the kernel's unit size.
int attention_decode_stage_bytes(int head_dim, bool fp8) { return 64 * 2 * head_dim * (fp8 ? 1 : 2); }

// The decode kernel's static shared memory, over-estimated (s_items, s_ml, s_weight, s_m, s_l and
// s_last of attention_decode.cu), so that the ring's choice leaves room for it.
int attention_decode_static_bytes(int group) {
  return k_decode_cta_items * 32 + group * k_max_decode_splits * 12 + 2 * 4 * group * 4 + 64;
}

// The decode kernel's dynamic shared memory (k_smem_bytes of attention_decode.cu; the kernel traps
// on less): the copy ring, then the four warps' accumulators of `group` heads.
unsigned attention_decode_smem_bytes(int head_dim, bool fp8, int group, int stages) {
  return unsigned(stages * attention_decode_stage_bytes(head_dim, fp8) + 4 * group * (head_dim + 4) * 4);
}

// Iterations in the decode kernel's copy ring (KV_STAGES), measured on an H200 with the kernel's
// CTAs each working through several items:
//   - 2 at head dim 128, BF16 (Llama-3.1-8B shape) and FP8: two CTAs an SM for BF16 (64 KiB of
//     ring each), four for FP8 (by registers). At 64 rows x 1k (the batch-64 step's attention),
//     BF16 took 0.069 ms against 0.075 with 3 stages (two CTAs an SM) and 0.077 with 4 (one), and
//     32 x 8k 0.251 ms against 0.271 and 0.263; eight warps a CTA instead of four (one CTA an SM)
//     took 0.072 and 0.251 ms with 2 stages, 0.081 and 0.279 with 3.
//   - 3 at head dim 64 (Llama-3.2-1B shape; measured before CTAs took several items): four (64 KiB,
//     three CTAs an SM) took 32 x 8k from 0.166 to 0.213 ms and the batch-64 step from 1.71 to 1.93 ms.
// Fewer where the device's shared memory per CTA (99 KiB on sm_86, sm_89 and sm_120) cannot hold them,
// down to one (copies then wait for the previous iteration's compute: 16 heads a CTA at head dim 128).
int attention_decode_stages(int head_dim, bool fp8, int group, int max_shared_bytes) {
  const auto bytes = [&](int stages) {
    return int(attention_decode_smem_bytes(head_dim, fp8, group, stages)) + attention_decode_static_bytes(group);
  };
  for (int stages = fp8 || head_dim == 128 ? 2 : 3; stages >= 1; --stages) {
    if (bytes(stages) <= max_shared_bytes) return stages;
  }
  fail_usage("decode attention of {} query heads a CTA at head size {} needs {} bytes of shared memory; this GPU "
             "gives a CTA {}", group, head_dim, bytes(1), max_shared_bytes);
}

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
              bt_ptr = arrays_.block_tables;
  long long k_stride = k.stride, v_stride = v.stride;
  int layer_i = layer, n_pages = l.n_pages, page_size = l.page_size_tokens, n_kv = l.n_kv_heads;
  const CUfunction f = function("attention", "flare_kv_store",
                                {{"HEAD_DIM", std::to_string(l.head_dim)}, {"KV_FP8", kv_fp8_define(l)}});
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
  if (step_.n_tokens() == 0) return;
  if (!fast_kernels_cover(p.head_dim)) {
    if (l.dtype != DType::bf16) fail_usage("f8_e4m3 KV pages need head size 64 or 128, not {}", p.head_dim);
    return attention_plain(cache, q, p, out);
  }
  if (step_.n_tokens() == step_.n_rows()) return attention_decode(cache, q, p, out);  // one token per row
  attention_prefill(cache, q, p, out);
}

void CudaBackend::attention_decode(const KvCache& cache, const Tensor& q, const AttentionParams& p, Tensor out) {
  const KvCacheLayout& l = cache.layout;
  const int group_size = p.n_heads / p.n_kv_heads;
  const int heads_per_cta = decode_heads_per_cta(group_size);
  const int n_rows = step_.n_rows();
  const std::int64_t n_ctas = std::int64_t(n_rows) * p.n_kv_heads * (group_size / heads_per_cta);
  std::int64_t max_keys = std::int64_t(l.n_pages) * l.page_size_tokens;
  if (p.sliding_window > 0) max_keys = std::min<std::int64_t>(max_keys, p.sliding_window);
  int n_splits = decode_splits(n_ctas, device().n_multiprocessors, max_keys);

  // Scratch: the merge counters [n_rows][n_heads] int at a fixed place in front (zero between
  // launches: the merging CTA resets its own), then partials acc [n_rows][n_heads][n_splits][head_dim]
  // f32 and ml [n_rows][n_heads][n_splits] float2 (rewritten by every launch).
  const std::size_t n_slots = std::size_t(n_rows) * std::size_t(p.n_heads) * std::size_t(n_splits);
  const std::size_t acc_bytes = n_slots * std::size_t(p.head_dim) * 4;
  const std::size_t counters_needed = std::size_t(n_rows) * std::size_t(p.n_heads);
  if (n_splits > 1 && (!attention_scratch_ || counters_needed > attention_counters_ ||
                       attention_scratch_->size_bytes() < attention_counters_ * 4 + acc_bytes + n_slots * 8)) {
    // rows x splits <= rows + (CTAs per SM x SMs) for any row count (decode_splits).
    const std::int64_t max_rows = std::max<std::int64_t>(n_rows, k_scratch_rows);
    const std::size_t max_slots =
        std::size_t(max_rows + std::int64_t(k_decode_ctas_per_sm) * device().n_multiprocessors) * std::size_t(p.n_heads);
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
  CUdeviceptr p_ptr = arrays_.positions, fb_ptr = arrays_.row_first_block, bt_ptr = arrays_.block_tables;
  long long q_stride = q.stride, out_stride = out.stride;
  int layer = p.layer, n_pages = l.n_pages, n_kv = l.n_kv_heads, n_heads = p.n_heads;
  int window = p.sliding_window, n_rows_arg = n_rows;
  float scale_log2 = p.scale * k_log2e;
  const bool fp8 = l.dtype == DType::f8_e4m3;
  const int stages = attention_decode_stages(p.head_dim, fp8, heads_per_cta, device().max_shared_bytes_per_block);
  const Defines defines = {{"HEAD_DIM", std::to_string(p.head_dim)},
                           {"PAGE_SIZE", std::to_string(l.page_size_tokens)},
                           {"GROUP", std::to_string(heads_per_cta)},
                           {"KV_FP8", kv_fp8_define(l)},
                           {"KV_STAGES", std::to_string(stages)}};
  const CUfunction f = function("attention_decode", "flare_attention_decode", defines);
  const unsigned smem = attention_decode_smem_bytes(p.head_dim, fp8, heads_per_cta, stages);
  if (attention_decode_smem_set_.insert(f).second) {  // once per loaded function, not per launch
    check(driver().func_set_attribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, int(smem)),
          "cuFuncSetAttribute");
  }
  // As many CTAs as are resident at once, each working through its share of the items (row, head
  // group, split) with its copy ring running on from one item to the next; more where the CTAs'
  // item tables would overflow.
  const auto [resident, inserted] = attention_decode_resident_.try_emplace(f, 0);
  if (inserted) {
    check(driver().occupancy_max_active_blocks(&resident->second, f, 128, smem),
          "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    resident->second = std::max(resident->second, 1);
  }
  const std::int64_t n_items = n_ctas * n_splits;
  const std::int64_t grid = std::min<std::int64_t>(
      n_items, std::max<std::int64_t>(std::int64_t(resident->second) * device().n_multiprocessors,
                                      (n_items + k_decode_cta_items - 1) / k_decode_cta_items));
  launch(f, {.grid_x = unsigned(grid), .block_x = 128, .shared_bytes = smem},
         {&q_ptr, &q_stride, &out_ptr, &out_stride, &acc_ptr, &ml_ptr, &c_ptr, &layer, &n_pages, &n_kv, &n_heads,
          &scale_log2, &window, &n_splits, &n_rows_arg, &p_ptr, &fb_ptr, &bt_ptr, &counters_ptr},
         "attention_decode", /*early_work=*/true);
}

void CudaBackend::attention_prefill(const KvCache& cache, const Tensor& q, const AttentionParams& p, Tensor out) {
  const KvCacheLayout& l = cache.layout;
  std::int32_t max_row_tokens = 0;
  for (const StepRow& row : step_.rows) max_row_tokens = std::max(max_row_tokens, row.n_tokens);
  CUdeviceptr q_ptr = address(q.data), out_ptr = address(out.data), c_ptr = address(cache.storage->data());
  CUdeviceptr p_ptr = arrays_.positions, r_ptr = arrays_.token_rows, fb_ptr = arrays_.row_first_block,
              bt_ptr = arrays_.block_tables;
  long long q_stride = q.stride, out_stride = out.stride;
  int layer = p.layer, n_pages = l.n_pages, page_size = l.page_size_tokens, n_kv = l.n_kv_heads;
  int n_tokens = int(q.rows), n_heads = p.n_heads, window = p.sliding_window;
  float scale_log2 = p.scale * k_log2e;
  const CUfunction f = function("attention_prefill", "flare_attention_prefill",
                                {{"HEAD_DIM", std::to_string(p.head_dim)}, {"KV_FP8", kv_fp8_define(l)}});
  launch(f,
         {.grid_x = unsigned((max_row_tokens + 16 * k_prefill_warps - 1) / (16 * k_prefill_warps)),
          .grid_y = unsigned(n_heads),
          .grid_z = unsigned(step_.n_rows()),
          .block_x = unsigned(32 * k_prefill_warps)},
         {&q_ptr, &q_stride, &out_ptr, &out_stride, &c_ptr, &layer, &n_pages, &page_size, &n_kv, &n_tokens, &n_heads,
          &scale_log2, &window, &p_ptr, &r_ptr, &fb_ptr, &bt_ptr},
         "attention_prefill");
}

void CudaBackend::attention_plain(const KvCache& cache, const Tensor& q, const AttentionParams& p, Tensor out) {
  const KvCacheLayout& l = cache.layout;
  CUdeviceptr q_ptr = address(q.data), out_ptr = address(out.data), c_ptr = address(cache.storage->data());
  CUdeviceptr p_ptr = arrays_.positions, r_ptr = arrays_.token_rows, fb_ptr = arrays_.row_first_block,
              bt_ptr = arrays_.block_tables;
  long long q_stride = q.stride, out_stride = out.stride;
  int layer = p.layer, n_pages = l.n_pages, page_size = l.page_size_tokens, n_kv = l.n_kv_heads;
  int n_tokens = int(q.rows), n_heads = p.n_heads, window = p.sliding_window;
  float scale = p.scale;
  const std::int64_t n_warps = std::int64_t(n_tokens) * n_heads;
  const CUfunction f = function("attention", "flare_attention", {{"HEAD_DIM", std::to_string(l.head_dim)}});
  launch(f, {.grid_x = unsigned((n_warps + 3) / 4), .block_x = 128},
         {&q_ptr, &q_stride, &out_ptr, &out_stride, &c_ptr, &layer, &n_pages, &page_size, &n_kv, &n_tokens, &n_heads,
          &scale, &window, &p_ptr, &r_ptr, &fb_ptr, &bt_ptr},
         "attention");
}

}  // namespace flare::helios::cuda
