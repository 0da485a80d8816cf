#include "bench/bench_report.h"

#include <algorithm>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/round_report.h"
#include "common/error.h"

namespace flare::bench {
namespace {

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double at = q * double(sorted.size() - 1);
  const std::size_t lo = std::size_t(at), hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - double(lo));
}

std::string ms(double v) { return fmt::format("{:.3f}", v); }
std::string pct(double ratio) { return fmt::format("{:.0f}%", 100.0 * ratio); }

nlohmann::json timing_json(const Timing& t) {
  return {{"median_ms", t.median_ms}, {"p25_ms", t.p25_ms}, {"p75_ms", t.p75_ms}, {"min_ms", t.min_ms},
          {"host_enqueue_ms", t.host_enqueue_ms}, {"samples_ms", t.samples_ms}};
}

// The measurement switches (--no-stream-gemm, --dependent-launch) that differ from the defaults,
// e.g. "stream GEMM off, dependent launch all"; empty at the defaults.
std::string backend_switches(const helios::cuda::CudaBackendOptions& o) {
  const helios::cuda::CudaBackendOptions defaults;
  std::string out;
  if (o.stream_gemm != defaults.stream_gemm) out = o.stream_gemm ? "stream GEMM on" : "stream GEMM off";
  if (o.dependent_launch != defaults.dependent_launch) {
    out += fmt::format("{}dependent launch {}", out.empty() ? "" : ", ",
                       helios::cuda::dependent_launch_name(o.dependent_launch));
  }
  return out;
}

void table_rates(std::string& out, const BenchReport& r) {
  out += fmt::format("device: {} ({}, {:.1f} GiB)\n", r.device_name, r.device_arch, double(r.device_bytes) / (1 << 30));
  if (const std::string switches = backend_switches(r.options.backend); !switches.empty()) {
    out += fmt::format("backend switches: {} (not what flare run serves with)\n", switches);
  }
  out += fmt::format("model: {} - {}\n", r.model_name, r.model_source);
  out += fmt::format("  {:.2f}B parameters, {} matrices; {:.2f} GB of weights read per decode step (embedding table "
                     "excluded)\n",
                     double(r.n_parameters) / 1e9, r.options.weights == helios::DType::f8_e4m3 ? "FP8" : "BF16",
                     r.weight_bytes_per_token / 1e9);
  out += fmt::format("copy bandwidth: {:.0f} GB/s (cuMemcpyDtoDAsync of {:.2f} GiB, read + write counted), {} ms\n",
                     r.rates.copy_gbs, r.rates.copy_bytes / double(1 << 30), ms(r.rates.copy.median_ms));
  out += fmt::format("BF16 GEMM: {:.1f} TFLOP/s (Backend::linear {}x{}x{}), {} ms\n", r.rates.gemm_tflops,
                     r.rates.gemm_m, r.rates.gemm_n, r.rates.gemm_k, ms(r.rates.gemm.median_ms));
}

void table_steps(std::string& out, const BenchReport& r) {
  for (const PrefillResult& p : r.prefill) {
    out += fmt::format("\nprefill: {} tokens in {} ms (IQR {}-{}) = {:.0f} tokens/s, {:.1f} TFLOP/s = {} of GEMM\n",
                       p.tokens, ms(p.timing.median_ms), ms(p.timing.p25_ms), ms(p.timing.p75_ms),
                       p.tokens / (p.timing.median_ms / 1e3), p.tflops, pct(p.ratio_to_gemm));
  }
  if (!r.decode.empty()) {
    out += fmt::format("\ndecode steps ({}; every row at its context; events around Model::forward_logits):\n",
                       r.step_runner);
    out += fmt::format("  {:>5} {:>7} {:>5} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}{}\n", "batch", "context", "kv",
                       "runner", "median ms", "p25 ms", "p75 ms", "host ms", "tokens/s", "eager ms",
                       r.decode.front().verify_tokens > 0 ? fmt::format("  verify x{} ms  / decode", r.decode.front().verify_tokens)
                                                          : std::string());
    for (const DecodeResult& d : r.decode) {
      if (!d.skipped.empty()) {
        out += fmt::format("  {:>5} {:>7} {:>5} skipped: {}\n", d.batch, d.context, d.kv_dtype, d.skipped);
        continue;
      }
      out += fmt::format("  {:>5} {:>7} {:>5} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10.0f} {:>10}{}\n", d.batch, d.context,
                         d.kv_dtype, d.runner, ms(d.timing.median_ms), ms(d.timing.p25_ms), ms(d.timing.p75_ms),
                         ms(d.timing.host_enqueue_ms), d.tokens_per_s, ms(d.eager.median_ms),
                         d.verify_tokens > 0 ? fmt::format("  {:>12} {:>8.3f}x", ms(d.verify.median_ms), d.verify_ratio)
                                             : std::string());
    }
  }
  if (r.batch1_tokens_per_s > 0) {
    out += fmt::format("batch 1: {:.1f} tokens/s; bandwidth bound {:.1f} tokens/s -> {}\n", r.batch1_tokens_per_s,
                       r.batch1_bound_tokens_per_s, pct(r.batch1_ratio));
  }
  if (r.batch64_over_batch1 > 0) out += fmt::format("batch 64 step / batch 1 step: {:.2f}x\n", r.batch64_over_batch1);
  for (const AttentionResult& a : r.attention) {
    if (!a.skipped.empty()) {
      out += fmt::format("\nattention alone ({} rows x {} tokens, {} KV): skipped: {}\n", a.batch, a.context, a.kv_dtype,
                         a.skipped);
      continue;
    }
    out += fmt::format("\nattention alone ({} rows x {} tokens, {} KV, one layer): {} ms, {:.2f} GB of KV -> {:.0f} GB/s = {} "
                       "of copy bandwidth\n",
                       a.batch, a.context, a.kv_dtype, ms(a.timing.median_ms), a.kv_bytes / 1e9, a.gbs,
                       pct(a.ratio_to_copy));
  }
}

void table_breakdowns(std::string& out, const BenchReport& r) {
  for (const Breakdown& b : r.breakdowns) {
    out += fmt::format("\nwhere one decode step's time goes (batch {}, context {}, bf16 KV; events between operations):\n",
                       b.batch, b.context);
    out += fmt::format("  {:<14} {:>6} {:>9} {:>6} {:>10} {:>10} {:>9} {:>8} {:>6}\n", "operation", "calls", "ms", "share",
                       "MB moved", "GFLOP", "bound ms", "bound", "of it");
    for (const BreakdownRow& row : b.rows) {
      out += fmt::format("  {:<14} {:>6} {:>9} {:>6} {:>10.1f} {:>10.2f} {:>9} {:>8} {:>6}\n", row.category, row.n_calls,
                         ms(row.ms), pct(b.sum_ms > 0 ? row.ms / b.sum_ms : 0), row.bytes / 1e6, row.flops / 1e9,
                         ms(row.bound_ms), row.bound_by.empty() ? "host" : row.bound_by,
                         row.ms > 0 && row.bound_ms > 0 ? pct(row.bound_ms / row.ms) : "-");
    }
    out += fmt::format("  {:<14} {:>6} {:>9} {:>6} {:>10} {:>10} {:>9} {:>8} {:>6}\n", "sum", "", ms(b.sum_ms), "", "", "",
                       ms(b.bound_ms), "", b.sum_ms > 0 ? pct(b.bound_ms / b.sum_ms) : "-");
    out += fmt::format("  (the step timed whole: {} ms)\n", ms(b.step_ms));
  }
}

}  // namespace

Timing timing_of(std::vector<double> samples_ms, std::vector<double> host_ms) {
  Timing t;
  t.samples_ms = samples_ms;
  std::sort(samples_ms.begin(), samples_ms.end());
  t.median_ms = quantile(samples_ms, 0.5);
  t.p25_ms = quantile(samples_ms, 0.25);
  t.p75_ms = quantile(samples_ms, 0.75);
  t.min_ms = samples_ms.empty() ? 0 : samples_ms.front();
  std::sort(host_ms.begin(), host_ms.end());
  t.host_enqueue_ms = quantile(host_ms, 0.5);
  return t;
}

void report_derive(BenchReport& r) {
  const DecodeResult* batch1 = nullptr;
  const DecodeResult* batch64 = nullptr;
  for (const DecodeResult& d : r.decode) {
    if (!d.skipped.empty() || d.context != r.options.contexts.front() || d.kv_dtype != "bf16") continue;
    if (d.batch == 1) batch1 = &d;
    if (d.batch == 64) batch64 = &d;
  }
  r.targets.clear();
  if (batch1 && r.weight_bytes_per_token > 0 && r.rates.copy_gbs > 0) {
    r.batch1_tokens_per_s = batch1->tokens_per_s;
    r.batch1_bound_tokens_per_s = r.rates.copy_gbs * 1e9 / r.weight_bytes_per_token;
    r.batch1_ratio = r.batch1_tokens_per_s / r.batch1_bound_tokens_per_s;
    r.targets.push_back({"batch-1 decode / bandwidth bound", r.batch1_ratio, 0.85, true});
  }
  if (batch1 && batch64) {
    r.batch64_over_batch1 = batch64->timing.median_ms / batch1->timing.median_ms;
    r.targets.push_back({"batch-64 step / batch-1 step", r.batch64_over_batch1, 1.6, false});
  }
  for (const PrefillResult& p : r.prefill) {
    r.targets.push_back({fmt::format("prefill {} tokens / GEMM throughput", p.tokens), p.ratio_to_gemm, 0.60, true});
  }
  for (const AttentionResult& a : r.attention) {
    if (!a.skipped.empty()) continue;
    r.targets.push_back(
        {fmt::format("attention {}x{} {} / copy bandwidth", a.batch, a.context, a.kv_dtype), a.ratio_to_copy, 0.80, true});
  }
}

std::string report_table(const BenchReport& r) {
  std::string out;
  table_rates(out, r);
  table_steps(out, r);
  out += rounds_table(r);
  table_breakdowns(out, r);
  if (!r.targets.empty()) {
    out += "\ntargets:\n";
    for (const Target& t : r.targets) {
      out += fmt::format("  {:<48} {:>8.3f} {} {:<6.2f} {}\n", t.name, t.measured, t.higher_is_better ? ">=" : "<=",
                         t.target, t.met() ? "met" : "NOT MET");
    }
  }
  for (const std::string& note : r.notes) out += fmt::format("note: {}\n", note);
  return out;
}

nlohmann::json report_json(const BenchReport& r) {
  using nlohmann::json;
  const BenchOptions& o = r.options;
  json kv = json::array();
  for (const auto dtype : o.kv_dtypes) kv.push_back(helios::dtype_name(dtype));
  json doc = {
      {"status", r.status},
      {"conventions",
       {{"copy_bandwidth", "read + write bytes of cuMemcpyDtoDAsync (2x the copy size) per second"},
        {"decode_bound", "weight bytes per step (all layer matrices, norms and the output head; not the embedding "
                         "table) / copy bandwidth"},
        {"timing", "CUDA events on the backend stream; median of the repetitions"},
        {"decode_timing", "a bucket's decode step replays its captured CUDA graph when the backend has graphs "
                          "(runner \"graph\"); \"eager\" also times it operation by operation"}}},
      {"device", {{"name", r.device_name}, {"arch", r.device_arch}, {"memory_bytes", r.device_bytes}}},
      {"model",
       {{"name", r.model_name},
        {"source", r.model_source},
        {"step_runner", r.step_runner},
        {"parameters", r.n_parameters},
        {"weight_bytes_per_token", r.weight_bytes_per_token}}},
      {"options",
       {{"gpu", o.gpu}, {"batches", o.batches}, {"contexts", o.contexts}, {"prefill_tokens", o.prefill_tokens},
        {"kv_dtypes", kv}, {"weights", r.options.weights == helios::DType::f8_e4m3 ? "fp8" : "bf16"},
        {"attention_batch", o.attention_batch}, {"attention_context", o.attention_context},
        {"warmup", o.warmup}, {"repetitions", o.repetitions}, {"seed", o.seed},
        {"backend",
         {{"stream_gemm", o.backend.stream_gemm},
          {"dependent_launch", std::string(helios::cuda::dependent_launch_name(o.backend.dependent_launch))},
          {"gemm_race_log", o.backend.gemm_race_log}}}}},
      {"rates",
       {{"copy_bytes", r.rates.copy_bytes}, {"copy_gbs", r.rates.copy_gbs}, {"copy", timing_json(r.rates.copy)},
        {"gemm_shape", {r.rates.gemm_m, r.rates.gemm_n, r.rates.gemm_k}}, {"gemm_tflops", r.rates.gemm_tflops},
        {"gemm", timing_json(r.rates.gemm)}}},
  };
  doc["prefill"] = json::array();
  for (const PrefillResult& p : r.prefill) {
    doc["prefill"].push_back({{"tokens", p.tokens}, {"flops", p.flops}, {"tflops", p.tflops},
                              {"ratio_to_gemm", p.ratio_to_gemm}, {"timing", timing_json(p.timing)}});
  }
  doc["decode"] = json::array();
  for (const DecodeResult& d : r.decode) {
    json entry = {{"batch", d.batch}, {"context", d.context}, {"kv_dtype", d.kv_dtype}};
    if (d.skipped.empty()) {
      entry["runner"] = d.runner;
      entry["tokens_per_s"] = d.tokens_per_s;
      entry["timing"] = timing_json(d.timing);
      entry["eager"] = timing_json(d.eager);
      if (d.verify_tokens > 0) {
        entry["verify_tokens"] = d.verify_tokens;
        entry["verify"] = timing_json(d.verify);
        entry["verify_ratio"] = d.verify_ratio;
      }
    } else {
      entry["skipped"] = d.skipped;
    }
    doc["decode"].push_back(entry);
  }
  doc["attention"] = json::array();
  for (const AttentionResult& a : r.attention) {
    json entry = {{"batch", a.batch}, {"context", a.context}, {"kv_dtype", a.kv_dtype}};
    if (a.skipped.empty()) {
      entry.update({{"kv_bytes", a.kv_bytes}, {"gbs", a.gbs}, {"ratio_to_copy", a.ratio_to_copy},
                    {"timing", timing_json(a.timing)}});
    } else {
      entry["skipped"] = a.skipped;
    }
    doc["attention"].push_back(entry);
  }
  doc["breakdowns"] = json::array();
  for (const Breakdown& b : r.breakdowns) {
    json rows = json::array();
    for (const BreakdownRow& row : b.rows) {
      rows.push_back({{"category", row.category}, {"calls", row.n_calls}, {"ms", row.ms}, {"bytes", row.bytes},
                      {"flops", row.flops}, {"bound_ms", row.bound_ms}, {"bound_by", row.bound_by}});
    }
    doc["breakdowns"].push_back({{"batch", b.batch}, {"context", b.context}, {"step_ms", b.step_ms},
                                 {"sum_ms", b.sum_ms}, {"bound_ms", b.bound_ms}, {"rows", rows}});
  }
  doc["summary"] = {{"batch1_tokens_per_s", r.batch1_tokens_per_s},
                    {"batch1_bound_tokens_per_s", r.batch1_bound_tokens_per_s},
                    {"batch1_ratio", r.batch1_ratio},
                    {"batch64_over_batch1", r.batch64_over_batch1}};
  doc["targets"] = json::array();
  for (const Target& t : r.targets) {
    doc["targets"].push_back({{"name", t.name}, {"measured", t.measured}, {"target", t.target},
                              {"higher_is_better", t.higher_is_better}, {"met", t.met()}});
  }
  if (o.rounds) doc["rounds"] = rounds_json(r);
  doc["notes"] = r.notes;
  return doc;
}

void report_write_json(const BenchReport& report, const std::filesystem::path& path) {
  const std::filesystem::path tmp = path.string() + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(ExitCode::failure, "cannot write {}", tmp.string());
    out << report_json(report).dump(2) << "\n";
    if (!out.flush()) fail(ExitCode::failure, "cannot write {}", tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail(ExitCode::failure, "cannot write {}: {}", path.string(), ec.message());
}

}  // namespace flare::bench
