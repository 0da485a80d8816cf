// The CUDA backend's mixture of experts (see backend.h, router_topk and moe_experts):
//   - router_topk: kernels/moe_router.cu, a warp per token;
//   - moe_experts: kernels/moe_experts.cu: an align kernel groups the (token, slot) pairs by expert
//     into tiles in a device workspace, then gate_up (with the activation in its epilogue) and down
//     run as grouped products over those tiles, and a combine kernel sums each token's slots.
//     Up to options_.moe_gemv_max_pairs pairs (by default max(64, 2 n_experts): decode and small
//     batches, a tile or two per expert) the products are warp-per-column GEMVs over tiles of 8
//     rows, bound by streaming each chosen expert's weights once; above, tensor-core GEMMs over
//     tiles of 64 rows. Steps of at most 32 pairs and a quarter of the experts
//     (options_.moe_fused_max_pairs) run the GEMVs fused: each warp groups the pairs itself, and
//     down sums each token's slots, so a decode step's experts are two launches rather than four.
//     BF16, MXFP4 (gpt-oss) or FP8 block-scaled (Qwen3 FP8) expert stacks, the latter two decoded as
//     the products load them; optional F32 expert biases, and the SwiGLU, GeGLU or clamped SwiGLU in
//     gate_up's epilogue.
// Every grid depends only on n_tokens, top_k, n_experts and the weight shapes: the product grids
// have the worst-case tile count and the CTAs past the step's tiles return, so a captured step
// replays for any routing. The workspace is the backend's (moe_workspace_), sized outside
// captures; growing it bumps graph_generation_.
#include <algorithm>

#include "common/error.h"
#include "helios/cuda/cuda_backend.h"
#include "helios/cuda/tensor_checks.h"

namespace flare::helios::cuda {
namespace {

constexpr std::int64_t k_moe_gemv_rows = 8;    // k_gemv_rows of moe_experts.cu
constexpr std::int64_t k_moe_mma_rows = 64;    // k_mma_m
constexpr std::int64_t k_moe_mma_gate_cols = 64, k_moe_mma_down_cols = 128;
constexpr std::int64_t k_moe_gemv_gate_cols = 8, k_moe_gemv_down_cols = 16;
constexpr unsigned k_moe_align_threads = 1024, k_moe_mma_threads = 128, k_moe_gemv_threads = 256;
constexpr unsigned k_moe_combine_threads = 128;
constexpr std::int64_t k_moe_fused_max_pairs = 32;  // k_fused_max_pairs of moe_experts.cu: a warp's lanes
constexpr unsigned k_moe_fused_down_threads = 256;
constexpr std::int64_t k_moe_fused_down_cols = 4;  // k_fused_down_cols
constexpr unsigned k_router_tokens_per_block = 4;
// The align kernel keeps two ints per expert in shared memory.
constexpr std::int64_t k_moe_max_experts = 4096;
// The workspace is first sized for this many tokens (or the step capacity, if larger), so that
// graphs captured after the first call do not see it move.
constexpr std::int64_t k_moe_workspace_tokens = 1024;

unsigned ceil_div(std::int64_t n, std::int64_t d) { return unsigned((n + d - 1) / d); }

// Worst-case tile count for `pairs` pairs over `n_experts` experts in tiles of `tile_rows`: every
// expert with a pair adds at most one partial tile.
std::int64_t max_tiles(std::int64_t pairs, std::int64_t n_experts, std::int64_t tile_rows) {
  return (pairs + tile_rows - 1) / tile_rows + std::min(n_experts, pairs);
}

// Workspace layout, in int32: [4: n_tiles, padding] [3 * max tiles: tiles] [pairs: sorted_pairs]
// [pairs: pair_pos]. The GEMV tiles (8 rows) are the most numerous.
struct MoeWorkspaceLayout {
  std::int64_t tiles = 0, sorted_pairs = 0, pair_pos = 0, n_ints = 0;
  static MoeWorkspaceLayout of(std::int64_t pairs, std::int64_t n_experts) {
    MoeWorkspaceLayout l;
    l.tiles = 0;
    l.sorted_pairs = (4 + 3 * max_tiles(pairs, n_experts, k_moe_gemv_rows) + 3) / 4 * 4;
    l.pair_pos = l.sorted_pairs + (pairs + 3) / 4 * 4;
    l.n_ints = l.pair_pos + (pairs + 3) / 4 * 4;
    return l;
  }
};

}  // namespace

// A stack of expert matrices as the products take it: BF16 [E][rows, cols], MXFP4 (values u8
// [E][rows, cols / 2], scales u8 [E][rows, cols / 32]), or FP8 (values e4m3 [E][rows, cols], scales
// f32 [E][ceil(rows / block_rows), ceil(cols / block_cols)]).
struct MoeExpertStack {
  enum class Format { bf16, mxfp4, fp8 };
  CUdeviceptr w = 0, scales = 0;
  long long w_stride = 0, w_expert_stride = 0;  // in elements of w
  long long s_stride = 0, s_expert_stride = 0;  // in elements of the scales
  int block_rows = 1, block_cols_log2 = 0;      // FP8: the scale blocks (moe_experts.cu's FlareMoeWeights)
  Format format = Format::bf16;

  // The products' entry point suffix.
  const char* suffix() const { return format == Format::mxfp4 ? "_mxfp4" : format == Format::fp8 ? "_fp8" : ""; }
  const char* name() const { return format == Format::mxfp4 ? "MXFP4" : format == Format::fp8 ? "FP8" : "BF16"; }
};

namespace {

// log2 of an FP8 stack's block_cols as the kernels take it: a power of two of at least 32, or (a
// block spanning the row) 30, which maps every column to scale column 0; -1 where neither holds.
int fp8_block_cols_log2(std::int64_t cols, std::int32_t block_cols) {
  if (block_cols >= cols) return 30;
  if (block_cols < 32 || (block_cols & (block_cols - 1)) != 0) return -1;
  int log2 = 0;
  while ((1 << log2) < block_cols) ++log2;
  return log2;
}

bool aligned_16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Rows of bf16 read or written in 16-byte chunks.
void expect_chunked(const Tensor& t, const char* what) {
  if (t.stride % 8 != 0 || !aligned_16(t.data) || (t.n_batch > 1 && t.batch_stride % 8 != 0)) {
    fail(ExitCode::failure, "internal: cuda {} needs 16-byte aligned rows (stride {})", what, t.stride);
  }
}

}  // namespace

bool CudaBackend::supports_fp8_experts(std::int64_t rows, std::int64_t cols, std::int32_t block_rows,
                                       std::int32_t block_cols) {
  return rows > 0 && cols % 32 == 0 && block_rows > 0 && fp8_block_cols_log2(cols, block_cols) >= 0;
}

void CudaBackend::router_topk(const Tensor& logits, const RouterParams& params, Tensor ids, Tensor weights) {
  const std::int64_t n = logits.rows, n_experts = logits.cols, k = params.top_k;
  expect_dtype(logits, DType::f32, "router logits");
  expect_dtype(ids, DType::i32, "router ids");
  expect_dtype(weights, DType::f32, "router weights");
  if (k < 1 || k > n_experts || k > 32) {
    fail(ExitCode::failure, "internal: cuda router top {} of {} experts (at most 32)", k, n_experts);
  }
  expect_shape(ids, n, k, "router ids");
  expect_shape(weights, n, k, "router weights");
  if (n == 0) return;
  CUdeviceptr l_ptr = address(logits), ids_ptr = address(ids), w_ptr = address(weights);
  long long l_stride = logits.stride, ids_stride = ids.stride, w_stride = weights.stride;
  int n_tokens = int(n), experts = int(n_experts), top_k = int(k), renormalize = params.renormalize ? 1 : 0;
  launch(function("moe_router", "flare_moe_router"),
         {.grid_x = ceil_div(n, k_router_tokens_per_block), .block_x = 32 * k_router_tokens_per_block},
         {&l_ptr, &l_stride, &n_tokens, &experts, &top_k, &renormalize, &ids_ptr, &ids_stride, &w_ptr, &w_stride},
         "moe_router");
}

void CudaBackend::reserve_moe_workspace(std::int64_t n_tokens, std::int64_t top_k, std::int64_t n_experts) {
  const std::size_t needed = std::size_t(MoeWorkspaceLayout::of(n_tokens * top_k, n_experts).n_ints) * 4;
  if (moe_workspace_ && moe_workspace_->size_bytes() >= needed) return;
  if (stream_.capturing()) {
    fail(ExitCode::failure, "internal: cuda moe_experts workspace for {} tokens x {} slots first sized in a graph "
         "capture (run the step once before capturing it)", n_tokens, top_k);
  }
  const std::int64_t tokens = std::max({n_tokens, step_capacity_tokens_, k_moe_workspace_tokens});
  const std::size_t size =
      std::max(needed, std::size_t(MoeWorkspaceLayout::of(tokens * top_k, std::max<std::int64_t>(n_experts, 256)).n_ints) * 4);
  stream_.synchronize();  // queued kernels may still use the old buffer
  moe_workspace_.reset();
  moe_workspace_ = std::make_unique<DeviceMemory>(size);
  ++graph_generation_;
}

namespace {

// expert_stack checks a stack's dtype, shape and alignment.
MoeExpertStack expert_stack(const Tensor& w, const QuantizedWeight& quant, std::int64_t n_experts, std::int64_t rows,
                         std::int64_t cols, const char* what) {
  using Format = MoeExpertStack::Format;
  MoeExpertStack s;
  const Tensor& sc = quant.scales;
  bool ok = false;
  switch (quant.format) {
    case QuantizedWeight::Format::none:
      s.format = Format::bf16;
      ok = w.dtype == DType::bf16 && w.cols == cols;
      break;
    case QuantizedWeight::Format::mxfp4:
      s.format = Format::mxfp4;
      ok = w.dtype == DType::u8 && w.cols * 2 == cols && sc.dtype == DType::u8 && sc.n_batch == n_experts &&
           sc.rows == rows && sc.cols * 32 == cols;
      break;
    case QuantizedWeight::Format::fp8_e4m3: {
      s.format = Format::fp8;
      s.block_rows = quant.block_rows;
      s.block_cols_log2 = fp8_block_cols_log2(cols, quant.block_cols);
      if (quant.block_rows < 1 || s.block_cols_log2 < 0) {
        fail(ExitCode::failure, "internal: cuda {} have FP8 blocks of {} x {}", what, quant.block_rows,
             quant.block_cols);
      }
      const std::int64_t bc = quant.block_cols;
      ok = w.dtype == DType::f8_e4m3 && w.cols == cols && sc.dtype == DType::f32 && sc.n_batch == n_experts &&
           sc.rows == (rows + quant.block_rows - 1) / quant.block_rows && sc.cols == (cols + bc - 1) / bc &&
           reinterpret_cast<std::uintptr_t>(sc.data) % 4 == 0;
      break;
    }
  }
  if (!ok || w.n_batch != n_experts || w.rows != rows) {
    fail(ExitCode::failure, "internal: cuda {} are {} [{}][{}, {}], expected [{}][{}, {}] ({})", what,
         dtype_name(w.dtype), w.n_batch, w.rows, w.cols, n_experts, rows, cols, s.name());
  }
  // 16-byte rows: 8 bf16 values, 32 MXFP4 values (16 value bytes) or 16 FP8 values.
  const std::int64_t elem_bytes = s.format == Format::bf16 ? 2 : 1;
  if (!aligned_16(w.data) || w.stride * elem_bytes % 16 != 0 || (w.n_batch > 1 && w.batch_stride * elem_bytes % 16 != 0)) {
    fail(ExitCode::failure, "internal: cuda {} need 16-byte aligned rows (stride {})", what, w.stride);
  }
  s.w = address(w);
  s.w_stride = w.stride;
  s.w_expert_stride = w.batch_stride;
  if (s.format != Format::bf16) {
    s.scales = address(sc);
    s.s_stride = sc.stride;
    s.s_expert_stride = n_experts > 1 ? sc.batch_stride : 0;
  }
  return s;
}

// An expert stack's optional F32 biases [E][1, cols]: the device address (0: none) and expert stride.
std::pair<CUdeviceptr, long long> expert_bias(const Tensor& bias, std::int64_t n_experts, std::int64_t cols,
                                              const char* what) {
  if (bias.empty()) return {0, 0};
  if (bias.dtype != DType::f32 || bias.n_batch != n_experts || bias.rows != 1 || bias.cols != cols) {
    fail(ExitCode::failure, "internal: cuda {} is {} [{}][{}, {}], expected f32 [{}][1, {}]", what,
         dtype_name(bias.dtype), bias.n_batch, bias.rows, bias.cols, n_experts, cols);
  }
  return {address(bias), n_experts > 1 ? bias.batch_stride : 0};
}

int activation_code(GatedActivation a) {  // flare_moe_act's
  switch (a) {
    case GatedActivation::silu: return 0;
    case GatedActivation::gelu_tanh: return 1;
    case GatedActivation::clamped_silu: return 2;
  }
  return 0;
}

}  // namespace

void CudaBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeExperts& experts,
                              const MoeScratch& scratch, Tensor out) {
  const std::int64_t n = x.rows, k = ids.cols, hidden = x.cols, n_experts = experts.gate_up.n_batch;
  const std::int64_t inter = experts.gate_up.rows / 2, pairs = n * k;
  expect_bf16(x, "moe input");
  expect_dtype(ids, DType::i32, "moe ids");
  expect_dtype(weights, DType::f32, "moe weights");
  expect_bf16(out, "moe output");
  expect_bf16(scratch.act, "moe act scratch");
  expect_bf16(scratch.expert_out, "moe expert_out scratch");
  expect_shape(ids, n, k, "moe ids");
  expect_shape(weights, n, k, "moe weights");
  expect_shape(out, n, hidden, "moe output");
  if (n_experts < 1 || n_experts > k_moe_max_experts) {
    fail(ExitCode::failure, "internal: cuda moe_experts of {} experts", n_experts);
  }
  const MoeExpertStack gate_up =
      expert_stack(experts.gate_up, experts.gate_up_quant, n_experts, 2 * inter, hidden, "moe gate_up experts");
  const MoeExpertStack down = expert_stack(experts.down, experts.down_quant, n_experts, hidden, inter, "moe down experts");
  if (gate_up.format != down.format) fail(ExitCode::failure, "internal: cuda moe gate_up and down in two formats");
  const auto [gate_up_bias, gate_up_bias_stride] =
      expert_bias(experts.gate_up_bias, n_experts, 2 * inter, "moe gate_up bias");
  const auto [down_bias, down_bias_stride] = expert_bias(experts.down_bias, n_experts, hidden, "moe down bias");
  expect_shape(scratch.act, pairs, inter, "moe act scratch");
  expect_shape(scratch.expert_out, pairs, hidden, "moe expert_out scratch");
  // BF16: a 16-byte chunk of a weight row; MXFP4 and FP8: the GEMM's 32-value stage slice.
  const std::int64_t multiple = gate_up.format == MoeExpertStack::Format::bf16 ? 8 : 32;
  if (hidden % multiple != 0 || inter % multiple != 0) {
    fail_usage("the CUDA backend's {} experts need hidden and intermediate sizes that are multiples of {}, not {} and {}",
               gate_up.name(), multiple, hidden, inter);
  }
  expect_chunked(x, "moe input");
  expect_chunked(out, "moe output");
  expect_chunked(scratch.act, "moe act scratch");
  expect_chunked(scratch.expert_out, "moe expert_out scratch");
  if (n == 0 || k == 0) return;

  const std::int64_t gemv_max_pairs = options_.moe_gemv_max_pairs >= 0 ? options_.moe_gemv_max_pairs
                                                                       : std::max<std::int64_t>(64, 2 * n_experts);
  const bool gemv = pairs <= gemv_max_pairs;
  // By default the fused kernels take steps whose pairs are few against the experts (at most a
  // quarter of them): then nearly every tile is one row of one expert, the products are short and
  // the align and combine launches a large share of the step (Qwen3-30B-A3B's batch-1 experts, 44 ->
  // 37 us on an H200). Where tokens share experts (gpt-oss-20b at 8 tokens, Mixtral), the unfused
  // down's finer grid over tiles won.
  const std::int64_t fused_max_pairs =
      options_.moe_fused_max_pairs >= 0
          ? std::min<std::int64_t>(options_.moe_fused_max_pairs, k_moe_fused_max_pairs)
          : std::min<std::int64_t>(k_moe_fused_max_pairs, n_experts / 4);
  if (gemv && pairs <= fused_max_pairs) {
    moe_experts_fused(x, ids, weights, experts, gate_up, down, scratch, out);
    return;
  }
  const std::int64_t tile_rows = gemv ? k_moe_gemv_rows : k_moe_mma_rows;
  const std::int64_t n_tiles = max_tiles(pairs, n_experts, tile_rows);
  if (n_tiles > 65535) fail(ExitCode::failure, "internal: cuda moe_experts of {} pairs: {} tiles", pairs, n_tiles);
  reserve_moe_workspace(n, k, n_experts);
  const MoeWorkspaceLayout layout = MoeWorkspaceLayout::of(pairs, n_experts);
  const CUdeviceptr ws = moe_workspace_->address();
  CUdeviceptr tiles_ptr = ws + std::size_t(layout.tiles) * 4, sorted_ptr = ws + std::size_t(layout.sorted_pairs) * 4,
              pos_ptr = ws + std::size_t(layout.pair_pos) * 4;
  const std::string suffix = gate_up.suffix();
  const std::string path = gemv ? "gemv" : "mma";

  {
    CUdeviceptr ids_ptr = address(ids);
    long long ids_stride = ids.stride;
    int n_tokens = int(n), top_k = int(k), experts_i = int(n_experts), rows = int(tile_rows);
    launch(function("moe_experts", "flare_moe_experts_align"),
           {.grid_x = 1, .block_x = k_moe_align_threads, .shared_bytes = unsigned(2 * n_experts * 4)},
           {&ids_ptr, &ids_stride, &n_tokens, &top_k, &experts_i, &rows, &tiles_ptr, &sorted_ptr, &pos_ptr},
           "moe_align");
  }
  {
    CUdeviceptr x_ptr = address(x), w_ptr = gate_up.w, s_ptr = gate_up.scales, b_ptr = gate_up_bias,
                act_ptr = address(scratch.act);
    long long x_stride = x.stride, w_stride = gate_up.w_stride, w_expert_stride = gate_up.w_expert_stride,
              s_stride = gate_up.s_stride, s_expert_stride = gate_up.s_expert_stride, b_stride = gate_up_bias_stride,
              act_stride = scratch.act.stride;
    int top_k = int(k), inter_i = int(inter), hidden_i = int(hidden), activation = activation_code(experts.activation);
    int block_rows = gate_up.block_rows, block_cols_log2 = gate_up.block_cols_log2;
    float limit = experts.clamp_limit, alpha = experts.clamp_alpha;
    const LaunchShape shape =
        gemv ? LaunchShape{.grid_x = ceil_div(inter, k_moe_gemv_gate_cols), .grid_y = unsigned(n_tiles),
                           .block_x = k_moe_gemv_threads}
             : LaunchShape{.grid_x = ceil_div(inter, k_moe_mma_gate_cols), .grid_y = unsigned(n_tiles),
                           .block_x = k_moe_mma_threads};
    launch(function("moe_experts", "flare_moe_experts_" + path + "_gate_up" + suffix), shape,
           {&x_ptr, &x_stride, &sorted_ptr, &top_k, &tiles_ptr, &w_ptr, &w_stride, &w_expert_stride, &s_ptr, &s_stride,
            &s_expert_stride, &block_rows, &block_cols_log2, &b_ptr, &b_stride, &inter_i, &hidden_i, &act_ptr,
            &act_stride, &activation, &limit, &alpha},
           "moe_gate_up");
  }
  {
    CUdeviceptr act_ptr = address(scratch.act), w_ptr = down.w, s_ptr = down.scales, b_ptr = down_bias,
                eo_ptr = address(scratch.expert_out);
    long long act_stride = scratch.act.stride, w_stride = down.w_stride, w_expert_stride = down.w_expert_stride,
              s_stride = down.s_stride, s_expert_stride = down.s_expert_stride, b_stride = down_bias_stride,
              eo_stride = scratch.expert_out.stride;
    int hidden_i = int(hidden), inter_i = int(inter), block_rows = down.block_rows,
        block_cols_log2 = down.block_cols_log2;
    const LaunchShape shape =
        gemv ? LaunchShape{.grid_x = ceil_div(hidden, k_moe_gemv_down_cols), .grid_y = unsigned(n_tiles),
                           .block_x = k_moe_gemv_threads}
             : LaunchShape{.grid_x = ceil_div(hidden, k_moe_mma_down_cols), .grid_y = unsigned(n_tiles),
                           .block_x = k_moe_mma_threads};
    launch(function("moe_experts", "flare_moe_experts_" + path + "_down" + suffix), shape,
           {&act_ptr, &act_stride, &tiles_ptr, &w_ptr, &w_stride, &w_expert_stride, &s_ptr, &s_stride,
            &s_expert_stride, &block_rows, &block_cols_log2, &b_ptr, &b_stride, &hidden_i, &inter_i, &eo_ptr,
            &eo_stride},
           "moe_down");
  }
  {
    CUdeviceptr eo_ptr = address(scratch.expert_out), w_ptr = address(weights), out_ptr = address(out);
    long long eo_stride = scratch.expert_out.stride, w_stride = weights.stride, out_stride = out.stride;
    int top_k = int(k), hidden_i = int(hidden);
    launch(function("moe_experts", "flare_moe_experts_combine"),
           {.grid_x = unsigned(n), .grid_y = ceil_div(hidden / 8, k_moe_combine_threads),
            .block_x = k_moe_combine_threads},
           {&eo_ptr, &eo_stride, &pos_ptr, &w_ptr, &w_stride, &top_k, &hidden_i, &out_ptr, &out_stride}, "moe_combine");
  }
}

// The fused decode path (moe_experts.cu, "Fused decode path"): gate_up over tiles every warp groups
// itself, then down with each token's slots summed into `out`; scratch.act holds the act rows.
void CudaBackend::moe_experts_fused(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                    const MoeExperts& experts, const MoeExpertStack& gate_up, const MoeExpertStack& down,
                                    const MoeScratch& scratch, Tensor out) {
  const std::int64_t n = x.rows, k = ids.cols, hidden = x.cols, n_experts = experts.gate_up.n_batch;
  const std::int64_t inter = experts.gate_up.rows / 2, pairs = n * k;
  const std::string suffix = gate_up.suffix();
  const auto [gate_up_bias, gate_up_bias_stride] =
      expert_bias(experts.gate_up_bias, n_experts, 2 * inter, "moe gate_up bias");
  const auto [down_bias, down_bias_stride] = expert_bias(experts.down_bias, n_experts, hidden, "moe down bias");
  CUdeviceptr ids_ptr = address(ids);
  long long ids_stride = ids.stride;
  int n_tokens = int(n), top_k = int(k), experts_i = int(n_experts), inter_i = int(inter), hidden_i = int(hidden);
  {
    CUdeviceptr x_ptr = address(x), w_ptr = gate_up.w, s_ptr = gate_up.scales, b_ptr = gate_up_bias,
                act_ptr = address(scratch.act);
    long long x_stride = x.stride, w_stride = gate_up.w_stride, w_expert_stride = gate_up.w_expert_stride,
              s_stride = gate_up.s_stride, s_expert_stride = gate_up.s_expert_stride, b_stride = gate_up_bias_stride,
              act_stride = scratch.act.stride;
    int activation = activation_code(experts.activation);
    int block_rows = gate_up.block_rows, block_cols_log2 = gate_up.block_cols_log2;
    float limit = experts.clamp_limit, alpha = experts.clamp_alpha;
    launch(function("moe_experts", "flare_moe_experts_fused_gate_up" + suffix),
           {.grid_x = ceil_div(inter, k_moe_gemv_gate_cols),
            .grid_y = unsigned(max_tiles(pairs, n_experts, k_moe_gemv_rows)),
            .block_x = k_moe_gemv_threads},
           {&x_ptr, &x_stride, &ids_ptr, &ids_stride, &n_tokens, &top_k, &experts_i, &w_ptr, &w_stride,
            &w_expert_stride, &s_ptr, &s_stride, &s_expert_stride, &block_rows, &block_cols_log2, &b_ptr, &b_stride,
            &inter_i, &hidden_i, &act_ptr, &act_stride, &activation, &limit, &alpha},
           "moe_fused_gate_up");
  }
  {
    CUdeviceptr act_ptr = address(scratch.act), wt_ptr = address(weights), w_ptr = down.w, s_ptr = down.scales,
                b_ptr = down_bias, out_ptr = address(out);
    long long act_stride = scratch.act.stride, wt_stride = weights.stride, w_stride = down.w_stride,
              w_expert_stride = down.w_expert_stride, s_stride = down.s_stride,
              s_expert_stride = down.s_expert_stride, b_stride = down_bias_stride, out_stride = out.stride;
    int block_rows = down.block_rows, block_cols_log2 = down.block_cols_log2;
    launch(function("moe_experts", "flare_moe_experts_fused_down" + suffix),
           {.grid_x = ceil_div(hidden, k_moe_fused_down_cols),
            .block_x = k_moe_fused_down_threads},
           {&act_ptr, &act_stride, &ids_ptr, &ids_stride, &wt_ptr, &wt_stride, &n_tokens, &top_k, &experts_i, &w_ptr,
            &w_stride, &w_expert_stride, &s_ptr, &s_stride, &s_expert_stride, &block_rows, &block_cols_log2, &b_ptr,
            &b_stride, &hidden_i, &inter_i, &out_ptr, &out_stride},
           "moe_fused_down");
  }
}

}  // namespace flare::helios::cuda
