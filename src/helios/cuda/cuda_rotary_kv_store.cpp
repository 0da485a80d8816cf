// The CUDA backend's fused rotary + KV store (backend.h rotary_kv_store): [Qwen3's q/k head norm],
// the rotation of q and k in place and the write of the rotated k and v into the layer's pages
// (BF16 or FP8 E4M3) as one launch of rotary_kv_store.cu. Like the separate rotary and kv_store,
// it reads positions, rows and block tables from the step descriptor's device arrays; its launch
// arguments are addresses and shapes only (plus the attention factor, which decode graphs key on),
// so a captured decode step replays it for any positions.
#include <string>

#include "common/error.h"
#include "helios/cuda/cuda_backend.h"
#include "helios/cuda/tensor_checks.h"

namespace flare::helios::cuda {
namespace {

constexpr int k_heads_per_cta = 4;  // k_warps of rotary_kv_store.cu

void expect_head_weight(const Tensor& w, std::int32_t head_dim, const char* what) {
  expect_dtype(w, DType::f32, what);
  if (w.rows * w.cols != head_dim) {
    fail(ExitCode::failure, "internal: cuda {} of [{}, {}] for head dim {}", what, w.rows, w.cols, head_dim);
  }
}

}  // namespace

void CudaBackend::rotary_kv_store(KvCache& cache, std::int32_t layer, Tensor q, Tensor k, const Tensor& v,
                                  std::int32_t head_dim, const RotaryParams& rope, const QkNormParams* qk_norm) {
  const KvCacheLayout& l = cache.layout;
  if (l.dtype != DType::bf16 && l.dtype != DType::f8_e4m3) {
    fail_usage("the CUDA backend stores KV pages as bf16 or f8_e4m3, not {}", dtype_name(l.dtype));
  }
  if (layer < 0 || layer >= l.n_layers) fail(ExitCode::failure, "internal: rotary_kv_store layer {}", layer);
  if (head_dim != l.head_dim) fail(ExitCode::failure, "internal: rotary_kv_store head dim {} against cache {}", head_dim, l.head_dim);
  expect_dtype(q, DType::bf16, "rotary_kv_store q");
  expect_dtype(k, DType::bf16, "rotary_kv_store k");
  expect_dtype(v, DType::bf16, "rotary_kv_store v");
  expect_dtype(rope.inv_freq, DType::f32, "rotary_kv_store frequencies");
  const std::int64_t n = step_.n_tokens(), kv_width = std::int64_t(l.n_kv_heads) * head_dim;
  if (q.rows != n || q.cols % head_dim != 0 || q.cols < head_dim) {
    fail(ExitCode::failure, "internal: rotary_kv_store q [{}, {}] for {} tokens of head dim {}", q.rows, q.cols, n, head_dim);
  }
  expect_shape(k, n, kv_width, "rotary_kv_store k");
  expect_shape(v, n, kv_width, "rotary_kv_store v");
  const std::int64_t half = rope.inv_freq.cols;
  if (half < 1 || 2 * half > head_dim) fail(ExitCode::failure, "internal: rotary dim {} > head dim {}", 2 * half, head_dim);
  if (rope.inv_freq.rows != 1 && rope.inv_freq.rows != step_.n_rows()) {
    fail(ExitCode::failure, "internal: rotary frequencies for {} rows in a step of {}", rope.inv_freq.rows, step_.n_rows());
  }
  CUdeviceptr qn_ptr = 0, kn_ptr = 0;
  float eps = 0.0f;
  if (qk_norm) {
    expect_head_weight(qk_norm->q_weight, head_dim, "q norm weight");
    expect_head_weight(qk_norm->k_weight, head_dim, "k norm weight");
    qn_ptr = address(qk_norm->q_weight.data);
    kn_ptr = address(qk_norm->k_weight.data);
    eps = qk_norm->eps;
  }
  CUdeviceptr q_ptr = address(q.data), k_ptr = address(k.data), v_ptr = address(v.data), f_ptr = address(rope.inv_freq.data),
              c_ptr = address(cache.storage->data());
  CUdeviceptr p_ptr = arrays_.positions, r_ptr = arrays_.token_rows, fb_ptr = arrays_.row_first_block,
              bt_ptr = block_tables_of(cache);
  long long q_stride = q.stride, k_stride = k.stride, v_stride = v.stride, f_stride = rope.inv_freq.stride;
  int n_q = int(q.cols / head_dim), n_kv = l.n_kv_heads, f_rows = int(rope.inv_freq.rows);
  int layer_i = layer, n_pages = l.n_pages, page_size = l.page_size_tokens;
  float factor = rope.attention_factor;
  const CUfunction f = function(rotary_kv_store_module(head_dim, half, l.dtype), "flare_rotary_kv_store");
  const unsigned heads = unsigned(n_q + 2 * n_kv);
  launch(f, {.grid_x = unsigned(n), .grid_y = (heads + k_heads_per_cta - 1) / k_heads_per_cta, .block_x = 32 * k_heads_per_cta},
         {&q_ptr, &q_stride, &n_q, &k_ptr, &k_stride, &v_ptr, &v_stride, &n_kv, &qn_ptr, &kn_ptr, &eps, &f_ptr,
          &f_stride, &f_rows, &factor, &c_ptr, &layer_i, &n_pages, &page_size, &p_ptr, &r_ptr, &fb_ptr, &bt_ptr},
         "rotary_kv_store");
}

}  // namespace flare::helios::cuda
