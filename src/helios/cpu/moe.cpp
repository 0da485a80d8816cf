// The CPU backend's mixture of experts (see backend.h, router_topk and moe_experts): the reference the
// CUDA kernels are checked against. The (token, slot) pairs are grouped by expert, each expert's
// pairs gathered into consecutive scratch rows and multiplied as one GEMM per projection, so an
// expert's weights are read once per step however many tokens chose it. MXFP4 experts are decoded
// to BF16 (exactly: an E2M1 value times a power of two is a BF16 value) just before their GEMM, FP8
// experts to bf16(e4m3 * scale) (the weights a load that dequantizes them would hold).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/error.h"
#include "helios/cpu/activation.h"
#include "helios/cpu/cpu_backend.h"
#include "helios/cpu/gemm.h"
#include "helios/mxfp4.h"

namespace flare::helios::cpu {
namespace {

void expect(const Tensor& t, DType dtype, std::int64_t rows, std::int64_t cols, const char* what) {
  if (t.dtype != dtype || t.rows != rows || t.cols != cols) {
    fail(ExitCode::failure, "internal: cpu {} is {} [{}, {}], expected {} [{}, {}]", what, dtype_name(t.dtype), t.rows,
         t.cols, dtype_name(dtype), rows, cols);
  }
}

template <typename T>
T* row(const Tensor& t, std::int64_t r) {
  return static_cast<T*>(t.data) + r * t.stride;
}

// out[rows] = x[rows] @ w^T for `rows` consecutive rows of x and out.
void gemm_rows(ThreadPool& pool, const Tensor& x, std::int64_t first, std::int64_t n_rows, const Tensor& w,
               const Tensor& out) {
  GemmArgs args;
  args.x = row<const float>(x, first);
  args.x_stride = x.stride;
  args.w = static_cast<const std::uint16_t*>(w.data);
  args.out = row<float>(out, first);
  args.out_stride = out.stride;
  args.m = n_rows;
  args.n = w.rows;
  args.k = w.cols;
  gemm_bf16(pool, args);
}

// Expert e of an FP8 stack decoded into `decoded` by the pool's threads: bf16(e4m3 * its block's
// scale).
Tensor fp8_expert_matrix(ThreadPool& pool, const Tensor& stack, const QuantizedWeight& quant, std::int64_t e,
                         std::vector<std::uint16_t>& decoded) {
  const Tensor values = stack.batch(e), scales = quant.scales.batch(e);
  const std::int64_t rows = values.rows, cols = values.cols;
  decoded.resize(std::size_t(rows * cols));
  pool.parallel_for(rows, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const std::uint8_t* v = row<const std::uint8_t>(values, r);
      const float* s = row<const float>(scales, r / quant.block_rows);
      std::uint16_t* dst = decoded.data() + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) dst[c] = f32_to_bf16(f8_e4m3_to_f32(v[c]) * s[c / quant.block_cols]);
    }
  });
  return Tensor{decoded.data(), DType::bf16, rows, cols, cols};
}

// Expert e of a stack as a BF16 matrix: the stack's own rows, or its MXFP4 or FP8 rows decoded into
// `decoded`.
Tensor expert_matrix(ThreadPool& pool, const Tensor& stack, const QuantizedWeight& quant, std::int64_t e,
                     std::vector<std::uint16_t>& decoded) {
  if (quant.format == QuantizedWeight::Format::fp8_e4m3) return fp8_expert_matrix(pool, stack, quant, e, decoded);
  if (quant.format != QuantizedWeight::Format::mxfp4) return stack.batch(e);
  const Tensor values = stack.batch(e), scales = quant.scales.batch(e);
  const std::int64_t cols = values.cols * 2;
  decoded.resize(std::size_t(values.rows * cols));
  std::vector<float> row_values(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < values.rows; ++r) {
    mxfp4_decode_row(row<const std::uint8_t>(values, r), row<const std::uint8_t>(scales, r), cols, row_values.data());
    for (std::int64_t c = 0; c < cols; ++c) decoded[std::size_t(r * cols + c)] = f32_to_bf16(row_values[std::size_t(c)]);
  }
  return Tensor{decoded.data(), DType::bf16, values.rows, cols, cols};
}

// The stack's dtype and shape per matrix, [rows, cols] as the product sees it.
void expect_stack(const Tensor& stack, const QuantizedWeight& quant, std::int64_t n_experts, std::int64_t rows,
                  std::int64_t cols, const char* what) {
  const Tensor& s = quant.scales;
  bool ok = false;
  const char* format = "bf16";
  switch (quant.format) {
    case QuantizedWeight::Format::none:
      ok = stack.dtype == DType::bf16 && stack.cols == cols;
      break;
    case QuantizedWeight::Format::mxfp4:
      format = "mxfp4";
      ok = stack.dtype == DType::u8 && stack.cols * 2 == cols && s.dtype == DType::u8 && s.n_batch == n_experts &&
           s.rows == rows && s.cols * k_mxfp4_block == cols && cols % k_mxfp4_block == 0;
      break;
    case QuantizedWeight::Format::fp8_e4m3:
      format = "fp8";
      ok = stack.dtype == DType::f8_e4m3 && stack.cols == cols && quant.block_rows > 0 && quant.block_cols > 0 &&
           s.dtype == DType::f32 && s.n_batch == n_experts &&
           s.rows == (rows + quant.block_rows - 1) / quant.block_rows &&
           s.cols == (cols + quant.block_cols - 1) / quant.block_cols;
      break;
  }
  if (!ok || stack.n_batch != n_experts || stack.rows != rows) {
    fail(ExitCode::failure, "internal: cpu moe {} is {} [{}][{}, {}], expected [{}][{}, {}] ({})", what,
         dtype_name(stack.dtype), stack.n_batch, stack.rows, stack.cols, n_experts, rows, cols, format);
  }
}

float activate(const MoeExperts& experts, float g, float u) {
  switch (experts.activation) {
    case GatedActivation::silu: return silu(g) * u;
    case GatedActivation::gelu_tanh: return gelu_tanh(g) * u;
    case GatedActivation::clamped_silu: {
      g = std::min(g, experts.clamp_limit);
      u = std::clamp(u, -experts.clamp_limit, experts.clamp_limit);
      return (u + 1.0f) * g / (1.0f + std::exp(-experts.clamp_alpha * g));
    }
  }
  return 0.0f;
}

// rows [first, first + n) of out += bias (f32 [1, cols]).
void add_bias(const Tensor& out, std::int64_t first, std::int64_t n, const Tensor& bias) {
  const float* b = static_cast<const float*>(bias.data);
  for (std::int64_t r = first; r < first + n; ++r) {
    float* dst = row<float>(out, r);
    for (std::int64_t c = 0; c < out.cols; ++c) dst[c] += b[c];
  }
}

}  // namespace

void CpuBackend::router_topk(const Tensor& logits, const RouterParams& params, Tensor ids, Tensor weights) {
  const std::int64_t n_experts = logits.cols, k = params.top_k;
  if (k < 1 || k > n_experts) fail(ExitCode::failure, "internal: router top {} of {} experts", k, n_experts);
  expect(logits, DType::f32, logits.rows, n_experts, "router logits");
  expect(ids, DType::i32, logits.rows, k, "router ids");
  expect(weights, DType::f32, logits.rows, k, "router weights");
  pool_.parallel_for(logits.rows, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> probs(static_cast<std::size_t>(n_experts));
    std::vector<char> taken(static_cast<std::size_t>(n_experts));
    for (std::int64_t t = begin; t < end; ++t) {
      const float* l = row<const float>(logits, t);
      float max = l[0];
      for (std::int64_t e = 1; e < n_experts; ++e) max = std::max(max, l[e]);
      float sum = 0.0f;
      for (std::int64_t e = 0; e < n_experts; ++e) sum += probs[std::size_t(e)] = std::exp(l[e] - max);
      for (float& p : probs) p /= sum;
      std::fill(taken.begin(), taken.end(), 0);
      std::int32_t* out_ids = row<std::int32_t>(ids, t);
      float* out_w = row<float>(weights, t);
      float chosen = 0.0f;
      for (std::int64_t j = 0; j < k; ++j) {
        std::int64_t best = -1;
        for (std::int64_t e = 0; e < n_experts; ++e) {  // strict >: the lower index wins a tie
          if (!taken[std::size_t(e)] && (best < 0 || probs[std::size_t(e)] > probs[std::size_t(best)])) best = e;
        }
        taken[std::size_t(best)] = 1;
        out_ids[j] = std::int32_t(best);
        out_w[j] = probs[std::size_t(best)];
        chosen += out_w[j];
      }
      if (params.renormalize) {
        for (std::int64_t j = 0; j < k; ++j) out_w[j] /= chosen;
      }
    }
  });
}

void CpuBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeExperts& experts,
                             const MoeScratch& scratch, Tensor out) {
  const std::int64_t n = x.rows, k = ids.cols, hidden = x.cols, n_experts = experts.gate_up.n_batch;
  const std::int64_t inter = experts.gate_up.rows / 2;
  expect(x, DType::f32, n, hidden, "moe input");
  expect(ids, DType::i32, n, k, "moe ids");
  expect(weights, DType::f32, n, k, "moe weights");
  expect(out, DType::f32, n, hidden, "moe output");
  expect_stack(experts.gate_up, experts.gate_up_quant, n_experts, 2 * inter, hidden, "gate_up experts");
  expect_stack(experts.down, experts.down_quant, n_experts, hidden, inter, "down experts");
  if (!experts.gate_up_bias.empty()) expect(experts.gate_up_bias.batch(0), DType::f32, 1, 2 * inter, "gate_up bias");
  if (!experts.down_bias.empty()) expect(experts.down_bias.batch(0), DType::f32, 1, hidden, "down bias");
  expect(scratch.gate_up, DType::f32, n * k, 2 * inter, "moe gate_up scratch");
  expect(scratch.act, DType::f32, n * k, inter, "moe act scratch");
  expect(scratch.expert_out, DType::f32, n * k, hidden, "moe expert_out scratch");

  // The pairs by expert: first[e] .. first[e + 1] in `pairs` (t * k + j), in token order.
  std::vector<std::int64_t> first(static_cast<std::size_t>(n_experts + 1), 0);
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int32_t e = row<const std::int32_t>(ids, t)[j];
      if (e < 0 || e >= n_experts) fail(ExitCode::failure, "internal: cpu moe expert id {} of {}", e, n_experts);
      ++first[std::size_t(e) + 1];
    }
  }
  for (std::int64_t e = 0; e < n_experts; ++e) first[std::size_t(e) + 1] += first[std::size_t(e)];
  std::vector<std::int64_t> pairs(static_cast<std::size_t>(n * k)), slot_row(static_cast<std::size_t>(n * k));
  {
    std::vector<std::int64_t> cursor(first.begin(), first.end() - 1);
    for (std::int64_t p = 0; p < n * k; ++p) {
      const std::int64_t r = cursor[std::size_t(row<const std::int32_t>(ids, p / k)[p % k])]++;
      pairs[std::size_t(r)] = p;
      slot_row[std::size_t(p)] = r;
    }
  }
  // Gather: scratch row r holds the input of pair pairs[r] (expert_out doubles as the gathered input).
  pool_.parallel_for(n * k, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const float* src = row<const float>(x, pairs[std::size_t(r)] / k);
      std::copy(src, src + hidden, row<float>(scratch.expert_out, r));
    }
  });
  std::vector<std::uint16_t> decoded;  // an MXFP4 or FP8 expert's matrix as BF16
  for (std::int64_t e = 0; e < n_experts; ++e) {
    const std::int64_t begin = first[std::size_t(e)], count = first[std::size_t(e) + 1] - begin;
    if (count == 0) continue;
    gemm_rows(pool_, scratch.expert_out, begin, count,
              expert_matrix(pool_, experts.gate_up, experts.gate_up_quant, e, decoded), scratch.gate_up);
    if (!experts.gate_up_bias.empty()) add_bias(scratch.gate_up, begin, count, experts.gate_up_bias.batch(e));
  }
  pool_.parallel_for(n * k, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const float* g = row<const float>(scratch.gate_up, r);
      const float* u = g + inter;
      float* a = row<float>(scratch.act, r);
      for (std::int64_t c = 0; c < inter; ++c) a[c] = activate(experts, g[c], u[c]);
    }
  });
  for (std::int64_t e = 0; e < n_experts; ++e) {
    const std::int64_t begin = first[std::size_t(e)], count = first[std::size_t(e) + 1] - begin;
    if (count == 0) continue;
    gemm_rows(pool_, scratch.act, begin, count, expert_matrix(pool_, experts.down, experts.down_quant, e, decoded),
              scratch.expert_out);
    if (!experts.down_bias.empty()) add_bias(scratch.expert_out, begin, count, experts.down_bias.batch(e));
  }
  // Combine, slot by slot in the router's order, in F32.
  pool_.parallel_for(n, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t t = b; t < e; ++t) {
      float* dst = row<float>(out, t);
      std::fill(dst, dst + hidden, 0.0f);
      for (std::int64_t j = 0; j < k; ++j) {
        const float w = row<const float>(weights, t)[j];
        const float* src = row<const float>(scratch.expert_out, slot_row[std::size_t(t * k + j)]);
        for (std::int64_t c = 0; c < hidden; ++c) dst[c] += w * src[c];
      }
    }
  });
}

}  // namespace flare::helios::cpu
