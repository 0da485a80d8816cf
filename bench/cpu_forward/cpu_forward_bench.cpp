// CPU backend throughput on a ~100M-parameter Llama-shaped model with random BF16 weights
// (hidden 768, 12 layers, 12 heads / 4 KV heads of 64, MLP 2048, vocab 32000, tied embeddings),
// against the memory-bandwidth bound of decoding (every weight read once per step).
//   bench/cpu_forward: cpu_forward_bench [--threads N] [--prefill 512] [--decode 64]
// Prints the measured read bandwidth, prefill tokens/s, batch-1 decode tokens/s and the bound.
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "helios/cpu/cpu_backend.h"
#include "helios/page_pool.h"
#include "model/model.h"
#include "package/safetensors.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kHidden = 768, kLayers = 12, kHeads = 12, kKvHeads = 4, kHeadDim = 64, kInter = 2048, kVocab = 32000;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void write_model(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << fmt::format(
      R"({{"architectures": ["LlamaForCausalLM"], "hidden_size": {}, "num_hidden_layers": {}, "num_attention_heads": {},
"num_key_value_heads": {}, "head_dim": {}, "intermediate_size": {}, "vocab_size": {}, "tie_word_embeddings": true,
"max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu"}})",
      kHidden, kLayers, kHeads, kKvHeads, kHeadDim, kInter, kVocab);
  using flare::package::DType;
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors = {{"model.embed_tokens.weight", {kVocab, kHidden}},
                                                                            {"model.norm.weight", {kHidden}}};
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    tensors.push_back({p + "input_layernorm.weight", {kHidden}});
    tensors.push_back({p + "post_attention_layernorm.weight", {kHidden}});
    tensors.push_back({p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden}});
    tensors.push_back({p + "self_attn.k_proj.weight", {kKvHeads * kHeadDim, kHidden}});
    tensors.push_back({p + "self_attn.v_proj.weight", {kKvHeads * kHeadDim, kHidden}});
    tensors.push_back({p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim}});
    tensors.push_back({p + "mlp.gate_proj.weight", {kInter, kHidden}});
    tensors.push_back({p + "mlp.up_proj.weight", {kInter, kHidden}});
    tensors.push_back({p + "mlp.down_proj.weight", {kHidden, kInter}});
  }
  flare::package::SafetensorsWriter writer(dir / "model.safetensors", {});
  for (const auto& [name, shape] : tensors) writer.declare(name, DType::bf16, shape);
  std::mt19937 rng(0);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (const auto& [name, shape] : tensors) {
    std::size_t n = 1;
    for (auto d : shape) n *= std::size_t(d);
    std::vector<std::uint16_t> data(n);
    const bool norm = shape.size() == 1;
    for (auto& v : data) v = flare::helios::f32_to_bf16(norm ? 1.0f : normal(rng));
    writer.write(std::as_bytes(std::span(data)));
  }
  writer.finish();
}

// Sustained read bandwidth with every thread summing its own slice of a 1 GiB buffer.
double read_bandwidth_gbs(int n_threads) {
  const std::size_t n = (std::size_t(1) << 30) / sizeof(float);
  std::vector<float> data(n, 1.0f);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<std::thread> threads;
    std::vector<double> sums(static_cast<std::size_t>(n_threads));
    const auto start = Clock::now();
    for (int t = 0; t < n_threads; ++t) {
      threads.emplace_back([&, t] {
        const std::size_t begin = n * std::size_t(t) / std::size_t(n_threads), end = n * std::size_t(t + 1) / std::size_t(n_threads);
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (std::size_t i = begin; i + 4 <= end; i += 4) {
          s0 += data[i]; s1 += data[i + 1]; s2 += data[i + 2]; s3 += data[i + 3];
        }
        sums[std::size_t(t)] = s0 + s1 + s2 + s3;
      });
    }
    for (auto& t : threads) t.join();
    best = std::max(best, double(n * sizeof(float)) / seconds_since(start) / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int n_threads = 0, n_prefill = 512, n_decode = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) n_threads = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--prefill")) n_prefill = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--decode")) n_decode = std::atoi(argv[i + 1]);
  }
  const auto dir = std::filesystem::temp_directory_path() / "flare-cpu-forward-bench";
  if (!std::filesystem::exists(dir / "model.safetensors")) write_model(dir);
  flare::helios::cpu::CpuBackend backend(n_threads);
  auto model = flare::model::Model::load(dir, backend);
  const auto& spec = model->spec();
  const double weight_bytes = double(spec.n_parameters() - std::int64_t(spec.tie_word_embeddings ? 0 : 0)) * 2.0;
  const int page_size = 16, n_pages = (n_prefill + n_decode) / page_size + 2;
  auto cache = flare::helios::history_allocate(backend, model->kv_cache_layout(n_pages, page_size));
  flare::helios::PagePool pool(n_pages);

  std::vector<std::int32_t> prompt(static_cast<std::size_t>(n_prefill));
  for (int i = 0; i < n_prefill; ++i) prompt[std::size_t(i)] = (i * 7919) % kVocab;
  auto run_step = [&](flare::helios::SequencePages& seq, const std::vector<std::int32_t>& tokens) {
    std::vector<flare::helios::PageCopy> copies;
    flare::helios::Step step;
    flare::helios::StepRow row;
    row.start_position = seq.n_tokens();
    row.n_tokens = std::int32_t(tokens.size());
    seq.append(row.n_tokens, copies);
    row.n_blocks = std::int32_t(seq.pages().size());
    step.rows.push_back(row);
    step.tokens = tokens;
    step.block_tables = seq.pages();
    return model->forward(step, cache);
  };
  const double bandwidth = read_bandwidth_gbs(backend.n_threads());
  flare::helios::SequencePages seq(pool, page_size);
  auto start = Clock::now();
  std::clock_t cpu_start = std::clock();
  auto logits = run_step(seq, prompt);
  const double prefill_s = seconds_since(start);
  const double prefill_cpu_s = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  start = Clock::now();
  cpu_start = std::clock();
  for (int i = 0; i < n_decode; ++i) {
    const auto next = std::int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    logits = run_step(seq, std::vector<std::int32_t>{next});
  }
  const double decode_s = seconds_since(start);
  const double decode_cpu_s = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double decode_tps = n_decode / decode_s;
  const double bound_tps = bandwidth * 1e9 / weight_bytes;
  std::printf("model: %.1fM parameters (%.0f MB of BF16 weights read per decode step), %d threads, avx2 %s\n",
              spec.n_parameters() / 1e6, weight_bytes / 1e6, backend.n_threads(),
              __builtin_cpu_supports("avx2") ? "yes" : "no");
  std::printf("read bandwidth: %.1f GB/s -> decode bound %.1f tokens/s\n", bandwidth, bound_tps);
  std::printf("prefill: %d tokens in %.2f s = %.1f tokens/s (%.1f GFLOP/s in GEMMs; %.2f CPU-s = %.1f%% of %d threads busy)\n",
              n_prefill, prefill_s, n_prefill / prefill_s, 2.0 * weight_bytes / 2.0 * n_prefill / prefill_s / 1e9,
              prefill_cpu_s, 100.0 * prefill_cpu_s / prefill_s / backend.n_threads(), backend.n_threads());
  std::printf("decode (batch 1, context %d..%d): %.1f tokens/s = %.0f%% of the bandwidth bound (%.2f CPU-s = %.1f%% of %d threads busy)\n",
              n_prefill, n_prefill + n_decode, decode_tps, 100.0 * decode_tps / bound_tps, decode_cpu_s,
              100.0 * decode_cpu_s / decode_s / backend.n_threads(), backend.n_threads());
  return 0;
}
