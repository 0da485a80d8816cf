#include "bench/cuda/timing_backend.h"

#include <cmath>

#include <algorithm>

namespace flare::bench::cuda {
namespace {

using helios::Tensor;

double elems(const Tensor& t) { return double(t.n_batch) * double(t.rows) * double(t.cols); }
double esize(const Tensor& t) { return double(helios::dtype_size_bytes(t.dtype)); }
double bytes_of(const Tensor& t) { return elems(t) * esize(t); }

}  // namespace

void TimingBackend::set_recording(bool on) { recording_ = on; }

void TimingBackend::mark(const std::string& category, double bytes, double flops) {
  if (!recording_) return;
  if (events_.size() <= n_events_) events_.emplace_back();
  events_[n_events_++].record(inner_.stream());
  event_categories_.push_back(category);
  if (category.empty()) return;
  auto [it, inserted] = totals_.try_emplace(category);
  if (inserted) order_.push_back(category);
  it->second.n_calls += 1;
  it->second.bytes += bytes;
  it->second.flops += flops;
}

std::vector<BreakdownRow> TimingBackend::collect(const DeviceRates& rates) {
  inner_.synchronize();
  for (std::size_t i = 1; i < n_events_; ++i) {
    if (event_categories_[i].empty()) continue;  // the gap before a step opens is not the step's
    totals_[event_categories_[i]].ms += elapsed_ms(events_[i - 1], events_[i]);
  }
  std::vector<BreakdownRow> rows;
  const double steps = std::max(n_steps_, 1);
  for (const std::string& category : order_) {
    const Totals& t = totals_[category];
    BreakdownRow row;
    row.category = category;
    row.n_calls = std::int32_t(t.n_calls / steps);
    row.ms = t.ms / steps;
    row.bytes = t.bytes / steps;
    row.flops = t.flops / steps;
    const double memory_ms = rates.copy_gbs > 0 ? row.bytes / (rates.copy_gbs * 1e9) * 1e3 : 0;
    const double compute_ms = rates.gemm_tflops > 0 ? row.flops / (rates.gemm_tflops * 1e12) * 1e3 : 0;
    row.bound_ms = std::max(memory_ms, compute_ms);
    if (row.bound_ms > 0) row.bound_by = memory_ms >= compute_ms ? "memory" : "compute";
    rows.push_back(row);
  }
  n_events_ = 0;
  n_steps_ = 0;
  event_categories_.clear();
  order_.clear();
  totals_.clear();
  return rows;
}

void TimingBackend::upload(helios::Buffer& dst, std::size_t offset, const void* src, std::size_t size) {
  inner_.upload(dst, offset, src, size);
  mark("upload", double(size), 0);
}

void TimingBackend::upload_step_input(helios::Buffer& dst, std::size_t offset, const void* src, std::size_t size) {
  inner_.upload_step_input(dst, offset, src, size);
  mark("step upload", double(size), 0);
}

void TimingBackend::replay(const helios::StepGraph& graph) {
  inner_.replay(graph);
  mark("graph replay", 0, 0);
}

void TimingBackend::begin_step(const helios::Step& step, std::span<const helios::KvCache* const> caches) {
  if (recording_) {
    ++n_steps_;
    mark("", 0, 0);  // opens the step
  }
  inner_.begin_step(step, caches);
  step_ = step;
  const double n_ints = double(3 * step.tokens.size() + step.rows.size() + step.block_tables.size() + step.n_logit_rows());
  mark("step upload", 4.0 * n_ints, 0);
}

void TimingBackend::embedding(const Tensor& table, Tensor out) {
  inner_.embedding(table, out);
  mark("embedding", 2.0 * bytes_of(out) + 4.0 * double(out.rows), 0);
}

void TimingBackend::rms_norm(const Tensor& x, Tensor* residual, const Tensor& weight, float eps, Tensor out) {
  inner_.rms_norm(x, residual, weight, eps, out);
  mark("norms", bytes_of(x) + (residual ? 2.0 * bytes_of(*residual) : 0.0) + bytes_of(out) + bytes_of(weight), 0);
}

void TimingBackend::head_rms_norm(Tensor x, std::int32_t head_dim, const Tensor& weight, float eps) {
  inner_.head_rms_norm(x, head_dim, weight, eps);
  mark("norms", 2.0 * bytes_of(x) + bytes_of(weight), 0);
}

std::string TimingBackend::linear_category(const Tensor& w) const {
  const auto it = weight_roles_.find(w.data);
  if (it == weight_roles_.end()) return "gemm other";
  return it->second == "lm_head" ? it->second : "gemm " + it->second;
}

void TimingBackend::linear(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor out) {
  inner_.linear(x, weight, bias, out);
  const double bytes = bytes_of(x) + bytes_of(weight) + bytes_of(out) + (bias ? bytes_of(*bias) : 0.0);
  mark(linear_category(weight), bytes, 2.0 * double(x.rows) * double(weight.rows) * double(weight.cols));
}

void TimingBackend::linear_residual_rms_norm(const Tensor& x, const Tensor& weight, Tensor delta, Tensor residual,
                                             const Tensor& norm_weight, float eps, Tensor out) {
  inner_.linear_residual_rms_norm(x, weight, delta, residual, norm_weight, eps, out);
  const double bytes = bytes_of(x) + bytes_of(weight) + 2.0 * bytes_of(residual) + bytes_of(out) + bytes_of(norm_weight);
  mark(linear_category(weight), bytes, 2.0 * double(x.rows) * double(weight.rows) * double(weight.cols));
}

void TimingBackend::linear_fp8(const Tensor& x, const Tensor& weight, const helios::QuantizedWeight& scales,
                               const Tensor* bias, Tensor out) {
  inner_.linear_fp8(x, weight, scales, bias, out);
  const double bytes =
      bytes_of(x) + bytes_of(weight) + bytes_of(scales.scales) + bytes_of(out) + (bias ? bytes_of(*bias) : 0.0);
  mark(linear_category(weight), bytes, 2.0 * double(x.rows) * double(weight.rows) * double(weight.cols));
}

void TimingBackend::rotary(Tensor q, Tensor k, std::int32_t head_dim, const helios::RotaryParams& rope) {
  inner_.rotary(q, k, head_dim, rope);
  mark("rotary", 2.0 * (bytes_of(q) + bytes_of(k)) + bytes_of(rope.inv_freq), 0);
}

void TimingBackend::kv_store(helios::KvCache& cache, std::int32_t layer, const Tensor& k, const Tensor& v) {
  inner_.kv_store(cache, layer, k, v);
  const double kv_size = double(helios::dtype_size_bytes(cache.layout.dtype));
  mark("kv store", bytes_of(k) + bytes_of(v) + (elems(k) + elems(v)) * kv_size, 0);
}

void TimingBackend::rotary_kv_store(helios::KvCache& cache, std::int32_t layer, Tensor q, Tensor k, const Tensor& v,
                                    std::int32_t head_dim, const helios::RotaryParams& rope,
                                    const helios::QkNormParams* qk_norm) {
  inner_.rotary_kv_store(cache, layer, q, k, v, head_dim, rope, qk_norm);
  // q and k read and written once, v read once, k and v written to the pages once.
  const double kv_size = double(helios::dtype_size_bytes(cache.layout.dtype));
  const double norm_bytes = qk_norm ? bytes_of(qk_norm->q_weight) + bytes_of(qk_norm->k_weight) : 0.0;
  const double qkv_bytes = 2.0 * (bytes_of(q) + bytes_of(k)) + bytes_of(v);
  mark("rope+kv store", qkv_bytes + (elems(k) + elems(v)) * kv_size + bytes_of(rope.inv_freq) + norm_bytes, 0);
}

void TimingBackend::attention(const helios::KvCache& cache, const Tensor& q, const helios::AttentionParams& p,
                              Tensor out) {
  inner_.attention(cache, q, p, out);
  // Every row reads its visible K and V once (more for prefill rows would be re-reads); each
  // token computes QK^T and PV over its own visible positions.
  const double token_kv_bytes =
      2.0 * double(p.n_kv_heads) * p.head_dim * double(helios::dtype_size_bytes(cache.layout.dtype));
  double kv_bytes = 0, flops = 0;
  for (const helios::StepRow& row : step_.rows) {
    const std::int64_t end = std::int64_t(row.start_position) + row.n_tokens;
    const std::int64_t first = p.sliding_window > 0 ? std::max<std::int64_t>(0, row.start_position - p.sliding_window + 1) : 0;
    kv_bytes += double(end - first) * token_kv_bytes;
    for (std::int32_t i = 0; i < row.n_tokens; ++i) {
      const std::int64_t position = std::int64_t(row.start_position) + i;
      const std::int64_t visible = p.sliding_window > 0 ? std::min<std::int64_t>(position + 1, p.sliding_window) : position + 1;
      flops += 4.0 * p.n_heads * p.head_dim * double(visible);
    }
  }
  mark("attention", kv_bytes + bytes_of(q) + bytes_of(out), flops);
}

void TimingBackend::swiglu(const Tensor& gate_up, Tensor out) {
  inner_.swiglu(gate_up, out);
  mark("swiglu", bytes_of(gate_up) + bytes_of(out), 0);
}

void TimingBackend::geglu(const Tensor& gate_up, Tensor out) {
  inner_.geglu(gate_up, out);
  mark("geglu", bytes_of(gate_up) + bytes_of(out), 0);
}

void TimingBackend::router_topk(const Tensor& logits, const helios::RouterParams& params, Tensor ids, Tensor weights) {
  inner_.router_topk(logits, params, ids, weights);
  mark("router", bytes_of(logits) + bytes_of(ids) + bytes_of(weights), 0);
}

void TimingBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                                const helios::MoeExperts& experts, const helios::MoeScratch& scratch, Tensor out) {
  inner_.moe_experts(x, ids, weights, experts, scratch, out);
  const double n_experts = double(experts.gate_up.n_batch), k = double(ids.cols), n = double(x.rows);
  const double touched = n_experts * (1.0 - std::pow(1.0 - k / n_experts, n));
  const double expert_bytes = (bytes_of(experts.gate_up) + bytes_of(experts.down)) / n_experts;
  const double flops = 2.0 * n * k * (double(experts.gate_up.rows) + double(experts.down.rows)) * double(x.cols);
  mark("experts", touched * expert_bytes + bytes_of(x) + bytes_of(out), flops);
}

void TimingBackend::soft_cap(Tensor x, float cap) {
  inner_.soft_cap(x, cap);
  mark("soft cap", 2.0 * bytes_of(x), 0);
}

void TimingBackend::scale(Tensor x, float factor) {
  inner_.scale(x, factor);
  mark("scale", 2.0 * bytes_of(x), 0);
}

void TimingBackend::linear_swiglu(const Tensor& x, const Tensor& weight, Tensor gate_up, Tensor out) {
  inner_.linear_swiglu(x, weight, gate_up, out);
  mark(linear_category(weight), bytes_of(x) + bytes_of(weight) + bytes_of(out),
       2.0 * double(x.rows) * double(weight.rows) * double(weight.cols));
}

void TimingBackend::gather_logit_rows(const Tensor& x, Tensor out) {
  inner_.gather_logit_rows(x, out);
  mark("gather", 2.0 * bytes_of(out), 0);
}

}  // namespace flare::bench::cuda
