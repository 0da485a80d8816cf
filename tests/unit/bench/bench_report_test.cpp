// The report's arithmetic: quantiles of timed runs, the derived batch-1 bound ratio and batch-64
// ratio, the targets, and the JSON fields the GPU check script reads.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/bench_report.h"

namespace flare::bench {
namespace {

DecodeResult decode(std::int32_t batch, double ms, const char* kv = "bf16") {
  DecodeResult d;
  d.batch = batch;
  d.context = 1024;
  d.kv_dtype = kv;
  d.timing = timing_of({ms, ms, ms});
  d.tokens_per_s = batch / (ms * 1e-3);
  return d;
}

TEST(BenchReport, TimingQuantiles) {
  const Timing t = timing_of({5, 1, 4, 2, 3}, {0.5, 0.1, 0.3});
  EXPECT_DOUBLE_EQ(t.median_ms, 3);
  EXPECT_DOUBLE_EQ(t.p25_ms, 2);
  EXPECT_DOUBLE_EQ(t.p75_ms, 4);
  EXPECT_DOUBLE_EQ(t.min_ms, 1);
  EXPECT_DOUBLE_EQ(t.host_enqueue_ms, 0.3);
  EXPECT_EQ(t.samples_ms, (std::vector<double>{5, 1, 4, 2, 3}));  // in run order
  EXPECT_DOUBLE_EQ(timing_of({1, 2}).median_ms, 1.5);
}

TEST(BenchReport, DerivesRatiosAndTargets) {
  BenchReport r;
  r.weight_bytes_per_token = 15e9;
  r.rates.copy_gbs = 4000;  // bound: 266.7 tokens/s
  r.rates.gemm_tflops = 600;
  r.decode = {decode(1, 5.0), decode(64, 7.5), decode(1, 4.0, "fp8")};
  PrefillResult p;
  p.tokens = 2048;
  p.ratio_to_gemm = 0.7;
  r.prefill.push_back(p);
  AttentionResult a;
  a.batch = 32;
  a.context = 8192;
  a.kv_dtype = "bf16";
  a.ratio_to_copy = 0.5;
  r.attention.push_back(a);
  AttentionResult skipped = a;
  skipped.kv_dtype = "fp8";
  skipped.skipped = "fp8 KV is not supported";
  r.attention.push_back(skipped);
  report_derive(r);
  EXPECT_DOUBLE_EQ(r.batch1_tokens_per_s, 200);  // the bf16 batch-1 row, not the fp8 one
  EXPECT_NEAR(r.batch1_bound_tokens_per_s, 266.667, 1e-3);
  EXPECT_NEAR(r.batch1_ratio, 0.75, 1e-9);
  EXPECT_DOUBLE_EQ(r.batch64_over_batch1, 1.5);
  ASSERT_EQ(r.targets.size(), 4u);  // the skipped attention case has none
  EXPECT_FALSE(r.targets[0].met());  // 0.75 < 0.85
  EXPECT_TRUE(r.targets[1].met());   // 1.5 <= 1.6
  EXPECT_TRUE(r.targets[2].met());   // 0.7 >= 0.6
  EXPECT_FALSE(r.targets[3].met());  // 0.5 < 0.8

  const nlohmann::json doc = report_json(r);
  EXPECT_EQ(doc["status"], "complete");
  EXPECT_NEAR(doc["summary"]["batch1_ratio"].get<double>(), 0.75, 1e-9);
  EXPECT_EQ(doc["decode"].size(), 3u);
  EXPECT_EQ(doc["attention"][1]["skipped"], "fp8 KV is not supported");
  EXPECT_EQ(doc["targets"][1]["met"], true);
  EXPECT_NE(report_table(r).find("NOT MET"), std::string::npos);
}

// The backend's measurement switches are in the JSON always, and in the table only when they
// differ from what flare run serves with.
TEST(BenchReport, RecordsTheBackendSwitches) {
  BenchReport r;
  nlohmann::json doc = report_json(r);
  EXPECT_EQ(doc["options"]["backend"]["stream_gemm"], true);
  EXPECT_EQ(doc["options"]["backend"]["dependent_launch"], "early-work");
  EXPECT_EQ(doc["options"]["backend"]["gemm_race_log"], false);
  EXPECT_EQ(report_table(r).find("backend switches"), std::string::npos);
  r.options.backend.stream_gemm = false;
  r.options.backend.dependent_launch = helios::cuda::DependentLaunch::all;
  doc = report_json(r);
  EXPECT_EQ(doc["options"]["backend"]["stream_gemm"], false);
  EXPECT_EQ(doc["options"]["backend"]["dependent_launch"], "all");
  EXPECT_NE(report_table(r).find("backend switches: stream GEMM off, dependent launch all"), std::string::npos)
      << report_table(r);
}

TEST(BenchReport, NoBatchOneMeansNoDecodeTargets) {
  BenchReport r;
  r.weight_bytes_per_token = 15e9;
  r.rates.copy_gbs = 4000;
  r.decode = {decode(64, 7.5)};
  report_derive(r);
  EXPECT_EQ(r.batch1_ratio, 0);
  EXPECT_EQ(r.batch64_over_batch1, 0);
  EXPECT_TRUE(r.targets.empty());
}

}  // namespace
}  // namespace flare::bench
