// What the mixture-of-experts GPU tests share (cuda_moe_test, cuda_moe_mxfp4_test,
// cuda_moe_fp8_test): a layer's expert stacks on both backends, the CPU's routing as tensors on
// both, moe_experts of one step on the CPU (the reference) and on a CUDA backend, the comparison,
// and backends of the same device that force one kernel path at every size.
#pragma once

#ifdef FLARE_HAVE_CUDA

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "gpu_support.h"

namespace flare::helios::gpu_testing {

// One layer's experts on both backends (stacks, scales and biases in `buffers`).
struct MoeLayer {
  std::int64_t n_experts = 0, inter = 0, hidden = 0;
  std::vector<std::unique_ptr<Buffer>> buffers;  // cpu and gpu memory behind the tensors
  MoeExperts cpu, gpu;
};

// A routing of n tokens as CPU and GPU tensors: ids [n, k] i32 (also in `ids`), weights [n, k] f32.
struct MoeRouting {
  Matrix cpu_ids, cpu_weights, gpu_ids, gpu_weights;
  std::vector<std::int32_t> ids;
};

// (tokens, top k) of the steps a test checks.
using MoeCases = std::vector<std::pair<std::int64_t, std::int32_t>>;

class MoeVersusCpuTest : public BackendVersusCpuTest {
 protected:
  // The same bytes in a CPU and a GPU buffer of `layer`, as [n_batch][rows, cols] tensors of `dtype`.
  std::pair<Tensor, Tensor> both(MoeLayer& layer, const void* bytes, std::size_t size, DType dtype,
                                 std::int64_t n_batch, std::int64_t rows, std::int64_t cols) {
    auto c = cpu_.allocate(size), g = gpu_->allocate(size);
    std::memcpy(c->data(), bytes, size);
    gpu_->upload(*g, 0, bytes, size);
    const std::pair<Tensor, Tensor> t{Tensor::of_batched(*c, dtype, n_batch, rows, cols),
                                      Tensor::of_batched(*g, dtype, n_batch, rows, cols)};
    layer.buffers.push_back(std::move(c));
    layer.buffers.push_back(std::move(g));
    return t;
  }

  // Random bytes from a fast generator seeded by rng_ (the large stacks hold hundreds of MB).
  std::vector<std::uint8_t> random_bytes(std::size_t n) {
    std::vector<std::uint8_t> v(n);
    std::uint64_t x = (std::uint64_t(rng_()) << 32) ^ rng_();
    for (std::size_t i = 0; i < n; i += 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
      for (std::size_t j = 0; j < 8 && i + j < n; ++j) v[i + j] = std::uint8_t(x >> (8 * j));
    }
    return v;
  }

  // F32 biases [n_experts][1, 2 inter] and [n_experts][1, hidden] in [-0.5, 0.5) on both backends.
  void add_biases(MoeLayer& layer) {
    const auto bias = [&](std::int64_t cols) {
      const std::vector<float> v = random_f32(std::size_t(layer.n_experts * cols), -0.5f, 0.5f);
      return both(layer, v.data(), v.size() * 4, DType::f32, layer.n_experts, 1, cols);
    };
    std::tie(layer.cpu.gate_up_bias, layer.gpu.gate_up_bias) = bias(2 * layer.inter);
    std::tie(layer.cpu.down_bias, layer.gpu.down_bias) = bias(layer.hidden);
  }

  // The CPU's routing of `logits` [n, E] (top k), as CPU and GPU tensors.
  MoeRouting cpu_routing(const std::vector<float>& logits, std::int64_t n, std::int64_t n_experts, std::int32_t k,
                         bool renormalize = true) {
    MoeRouting r;
    const Matrix cl = host_f32_values(logits, n, n_experts);
    r.cpu_ids = Matrix{cpu_.allocate(std::size_t(n * k) * 4), {}};
    r.cpu_ids.t = Tensor{r.cpu_ids.buffer->data(), DType::i32, n, k, k};
    r.cpu_weights = host_f32_values(std::vector<float>(std::size_t(n * k)), n, k);
    cpu_.router_topk(cl.t, {k, renormalize}, r.cpu_ids.t, r.cpu_weights.t);
    const auto* ids = static_cast<const std::int32_t*>(r.cpu_ids.t.data);
    r.ids.assign(ids, ids + n * k);
    r.gpu_ids = Matrix{gpu_->allocate(std::max<std::size_t>(r.ids.size(), 1) * 4), {}};
    gpu_->upload(*r.gpu_ids.buffer, 0, r.ids.data(), r.ids.size() * 4);
    r.gpu_ids.t = Tensor{r.gpu_ids.buffer->data(), DType::i32, n, k, k};
    r.gpu_weights = device_f32(*gpu_, host_values(r.cpu_weights), n, k);
    return r;
  }

  // The CPU's moe_experts of x [n, hidden] with `experts` (hidden, inter) under r's CPU tensors.
  std::vector<float> cpu_experts(const MoeExperts& experts, std::int64_t hidden, std::int64_t inter,
                                 const std::vector<std::uint16_t>& x, const MoeRouting& r, std::int64_t n,
                                 std::int64_t k) {
    const std::int64_t pairs = n * k;
    const Matrix cx = host_f32(cpu_, x, n, hidden);
    const Matrix c_gu = host_f32(cpu_, {}, pairs, 2 * inter), c_act = host_f32(cpu_, {}, pairs, inter),
                 c_eo = host_f32(cpu_, {}, pairs, hidden), c_out = host_f32(cpu_, {}, n, hidden);
    cpu_.moe_experts(cx.t, r.cpu_ids.t, r.cpu_weights.t, experts, {c_gu.t, c_act.t, c_eo.t}, c_out.t);
    return host_values(c_out);
  }

  // moe_experts of the same step on `gpu` (whose stacks and routing are gpu_'s memory), its rows
  // padded and poisoned as bf16 matrices are.
  std::vector<float> gpu_experts(cuda::CudaBackend& gpu, const MoeExperts& experts, std::int64_t hidden,
                                 std::int64_t inter, const std::vector<std::uint16_t>& x, const MoeRouting& r,
                                 std::int64_t n, std::int64_t k) {
    gpu_->synchronize();  // the stacks and routing were uploaded on gpu_'s stream
    const std::int64_t pairs = n * k;
    const Matrix gx = device_bf16(gpu, x, n, hidden, hidden + 8);
    const Matrix g_gu = device_bf16(gpu, {}, pairs, 2 * inter, 2 * inter),
                 g_act = device_bf16(gpu, {}, pairs, inter, inter + 8),
                 g_eo = device_bf16(gpu, {}, pairs, hidden, hidden + 8),
                 g_out = device_bf16(gpu, {}, n, hidden, hidden + 8);
    gpu.moe_experts(gx.t, r.gpu_ids.t, r.gpu_weights.t, experts, {g_gu.t, g_act.t, g_eo.t}, g_out.t);
    return device_values(gpu, g_out);
  }

  // Four bf16 roundings on the way (gate/up, act, expert rows, out) against F32 throughout: within
  // 2% of the largest output, and 2% of each.
  static void expect_experts_close(const std::string& label, const std::vector<float>& got,
                                   const std::vector<float>& want) {
    float max_ref = 0.0f;
    for (const float v : want) max_ref = std::max(max_ref, std::fabs(v));
    ASSERT_GT(max_ref, 0.0f) << label;
    expect_close(fmt::format("{} |ref|<{:.2f}", label, max_ref), got, want, 0.02f * max_ref, 0.02f);
  }

  // moe_experts of x under r on `on` (default gpu_) against `want`, the CPU's output.
  std::vector<float> check(const MoeLayer& layer, const MoeRouting& r, std::int64_t n, std::int64_t k,
                           const std::vector<std::uint16_t>& x, const std::vector<float>& want,
                           const std::string& label, cuda::CudaBackend* on = nullptr) {
    const std::vector<float> got =
        gpu_experts(on ? *on : *gpu_, layer.gpu, layer.hidden, layer.inter, x, r, n, k);
    expect_experts_close(label, got, want);
    return got;
  }

  // Backends of the same device that force one path at every size: the fused decode GEMVs (every
  // step of up to 32 pairs, whatever the expert count), the GEMVs with align and combine, the
  // tensor-core GEMMs.
  cuda::CudaBackend* fused_backend() { return backend_with(fused_, {.moe_fused_max_pairs = 32}); }
  cuda::CudaBackend* gemv_backend() {
    return backend_with(gemv_, {.moe_gemv_max_pairs = 1 << 30, .moe_fused_max_pairs = 0});
  }
  cuda::CudaBackend* mma_backend() { return backend_with(mma_, {.moe_gemv_max_pairs = 0}); }

 private:
  cuda::CudaBackend* backend_with(std::unique_ptr<cuda::CudaBackend>& slot, const cuda::CudaBackendOptions& options) {
    if (!slot) {
      std::string reason;
      slot = try_cuda_backend(&reason, options);
      EXPECT_TRUE(slot) << reason;
    }
    return slot.get();
  }

  std::unique_ptr<cuda::CudaBackend> fused_, gemv_, mma_;
};

}  // namespace flare::helios::gpu_testing

#endif  // FLARE_HAVE_CUDA
