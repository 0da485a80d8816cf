// The GPU benchmark (src/bench/) end to end on a small random-weight Llama shape: every part runs
// (device rates, prefill, decode buckets eagerly and through CUDA graphs, bf16 and fp8 KV,
// attention alone, the per-operation table) and its figures are self-consistent. Prints the table.
#ifdef FLARE_HAVE_CUDA

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "bench/gpu_bench.h"
#include "gpu_support.h"

namespace flare::bench {
namespace {

namespace fs = std::filesystem;

TEST(GpuBench, SmallShapeRunsEveryPart) {
  std::string reason;
  if (!helios::gpu_testing::try_cuda_backend(&reason)) GTEST_SKIP() << reason;
  const fs::path dir = fs::temp_directory_path() / ("flare-gpu-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 512,
    "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
    "intermediate_size": 1024, "vocab_size": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0})";
  const BenchModel model = bench_model_resolve((dir / "config.json").string());
  fs::remove_all(dir);
  ASSERT_TRUE(bench_model_random_weights(model));

  BenchOptions o;
  o.batches = {1, 4};
  o.contexts = {100};
  o.prefill_tokens = 128;
  o.kv_dtypes = {helios::DType::bf16, helios::DType::f8_e4m3};
  o.attention_batch = 4;
  o.attention_context = 512;
  o.warmup = 1;
  o.repetitions = 3;
  o.kernel_cache = helios::gpu_testing::kernel_cache_dir();
  int n_progress = 0;
  const BenchReport r = run_gpu_bench(model, o, [&](const BenchReport&, std::string_view) { ++n_progress; });
  std::fputs(report_table(r).c_str(), stdout);

  EXPECT_EQ(r.status, "complete");
  EXPECT_GE(n_progress, 5);
  EXPECT_GT(r.rates.copy_gbs, 0);
  EXPECT_GT(r.rates.gemm_tflops, 0);
  ASSERT_EQ(r.prefill.size(), 1u);
  EXPECT_GT(r.prefill[0].timing.median_ms, 0);
  ASSERT_EQ(r.decode.size(), 4u);  // 2 buckets x 2 KV dtypes
  for (const DecodeResult& d : r.decode) {
    if (d.kv_dtype == "fp8" && !d.skipped.empty()) continue;  // a backend may not take fp8 pages
    EXPECT_TRUE(d.skipped.empty()) << d.batch << " " << d.kv_dtype << ": " << d.skipped;
    EXPECT_EQ(d.runner, "graph") << "decode steps should replay their captured graph";
    EXPECT_GT(d.timing.median_ms, 0);
    EXPECT_GT(d.eager.median_ms, 0);
    EXPECT_EQ(d.timing.samples_ms.size(), 3u);
  }
  ASSERT_EQ(r.attention.size(), 2u);
  EXPECT_TRUE(r.attention[0].skipped.empty()) << r.attention[0].skipped;
  EXPECT_DOUBLE_EQ(r.attention[0].kv_bytes, 4.0 * 512 * 2 * 128 * 2);  // rows x tokens x K,V x kv width (2 x 64) x bf16
  EXPECT_GT(r.attention[0].gbs, 0);
  ASSERT_EQ(r.breakdowns.size(), 2u);  // batch 1 and the largest bucket, bf16 KV
  for (const Breakdown& b : r.breakdowns) {
    std::vector<std::string> categories;
    for (const BreakdownRow& row : b.rows) categories.push_back(row.category);
    for (const char* wanted : {"gemm qkv", "gemm o", "gemm gate_up", "gemm down", "lm_head", "attention", "norms"}) {
      EXPECT_NE(std::find(categories.begin(), categories.end(), wanted), categories.end()) << wanted;
    }
    const auto qkv = std::find_if(b.rows.begin(), b.rows.end(), [](const BreakdownRow& row) { return row.category == "gemm qkv"; });
    ASSERT_NE(qkv, b.rows.end());
    EXPECT_EQ(qkv->n_calls, 2);  // one per layer per step
    EXPECT_GT(b.sum_ms, 0);
    EXPECT_GT(b.bound_ms, 0);
  }
  EXPECT_GT(r.batch1_ratio, 0);
  EXPECT_FALSE(r.targets.empty());
}

}  // namespace
}  // namespace flare::bench

#endif  // FLARE_HAVE_CUDA
