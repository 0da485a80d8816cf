// cuda_forward_bench's argument parsing and the shared option checks: lists, dtypes, ranges, and
// usage errors (exit 2) that name the flag.
#include <gtest/gtest.h>

#include "bench/bench_options.h"
#include "common/error.h"

namespace flare::bench {
namespace {

ExitCode parse_error_code(const std::vector<std::string>& args, std::string* message = nullptr) {
  try {
    bench_args_parse(args);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return ExitCode::ok;
}

TEST(BenchOptions, DefaultsMeasureTheIssueTargets) {
  const BenchArgs a = bench_args_parse({});
  EXPECT_EQ(a.shape, "llama-3.1-8b");
  EXPECT_EQ(a.options.batches, (std::vector<std::int32_t>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(a.options.contexts, (std::vector<std::int32_t>{1024}));
  EXPECT_EQ(a.options.prefill_tokens, 2048);
  EXPECT_EQ(a.options.kv_dtypes, (std::vector<helios::DType>{helios::DType::bf16}));
  EXPECT_EQ(a.options.attention_batch, 32);
  EXPECT_EQ(a.options.attention_context, 8192);
  EXPECT_TRUE(a.options.breakdown);
  EXPECT_EQ(a.options.profile_batch, 0);
  EXPECT_FALSE(a.options.json_path);
  EXPECT_FALSE(a.help);
  // The CUDA backend's switches default to what flare run serves with.
  EXPECT_TRUE(a.options.backend.stream_gemm);
  EXPECT_EQ(a.options.backend.dependent_launch, helios::cuda::DependentLaunch::early_work);
  EXPECT_FALSE(a.options.backend.gemm_race_log);
  EXPECT_FALSE(a.options.backend.sampler_one_cta);
  EXPECT_FALSE(a.options.backend.sampler_global_slices);
}

TEST(BenchOptions, ParsesEveryOptionInBothForms) {
  const BenchArgs a = bench_args_parse({"--shape", "qwen3-8b", "--buckets=1,4,16", "--prefill", "512", "--context",
                                        "256,8192", "--kv-dtype", "bf16,fp8", "--attention-batch", "8",
                                        "--attention-context=0", "--warmup", "0", "--repetitions", "3", "--gpu", "1",
                                        "--seed", "7", "--json", "/tmp/x.json", "--kernel-cache", "/tmp/k",
                                        "--no-breakdown", "--profile-batch", "4", "--no-stream-gemm",
                                        "--dependent-launch", "all", "--gemm-race-log"});
  EXPECT_EQ(a.shape, "qwen3-8b");
  EXPECT_EQ(a.options.batches, (std::vector<std::int32_t>{1, 4, 16}));
  EXPECT_EQ(a.options.prefill_tokens, 512);
  EXPECT_EQ(a.options.contexts, (std::vector<std::int32_t>{256, 8192}));
  EXPECT_EQ(a.options.kv_dtypes, (std::vector<helios::DType>{helios::DType::bf16, helios::DType::f8_e4m3}));
  EXPECT_EQ(a.options.attention_batch, 8);
  EXPECT_EQ(a.options.attention_context, 0);
  EXPECT_EQ(a.options.warmup, 0);
  EXPECT_EQ(a.options.repetitions, 3);
  EXPECT_EQ(a.options.gpu, 1);
  EXPECT_EQ(a.options.seed, 7u);
  EXPECT_EQ(a.options.json_path->string(), "/tmp/x.json");
  EXPECT_EQ(a.options.kernel_cache->string(), "/tmp/k");
  EXPECT_FALSE(a.options.breakdown);
  EXPECT_EQ(a.options.profile_batch, 4);
  EXPECT_FALSE(a.options.backend.stream_gemm);
  EXPECT_EQ(a.options.backend.dependent_launch, helios::cuda::DependentLaunch::all);
  EXPECT_TRUE(a.options.backend.gemm_race_log);
  EXPECT_EQ(bench_args_parse({"--dependent-launch=off"}).options.backend.dependent_launch,
            helios::cuda::DependentLaunch::off);
  EXPECT_EQ(bench_args_parse({"--dependent-launch", "early-work"}).options.backend.dependent_launch,
            helios::cuda::DependentLaunch::early_work);
  EXPECT_TRUE(bench_args_parse({"--help"}).help);
  EXPECT_TRUE(bench_args_parse({"-h"}).help);
}

TEST(BenchOptions, BadValuesAreUsageErrorsNamingTheFlag) {
  std::string message;
  EXPECT_EQ(parse_error_code({"--buckets", "1,2,2"}, &message), ExitCode::usage);
  EXPECT_NE(message.find("--buckets: 2 is listed twice"), std::string::npos) << message;
  EXPECT_EQ(parse_error_code({"--buckets", "1,,4"}, &message), ExitCode::usage);
  EXPECT_NE(message.find("--buckets"), std::string::npos) << message;
  EXPECT_EQ(parse_error_code({"--buckets", "0"}, &message), ExitCode::usage);
  EXPECT_EQ(parse_error_code({"--buckets", ""}), ExitCode::usage);
  EXPECT_EQ(parse_error_code({"--buckets", "1,x"}), ExitCode::usage);
  EXPECT_EQ(parse_error_code({"--context", "-5"}), ExitCode::usage);
  EXPECT_EQ(parse_error_code({"--prefill", "12abc"}), ExitCode::usage);
  EXPECT_EQ(parse_error_code({"--repetitions", "0"}, &message), ExitCode::usage);
  EXPECT_NE(message.find("--repetitions"), std::string::npos) << message;
  EXPECT_EQ(parse_error_code({"--kv-dtype", "fp16"}, &message), ExitCode::usage);
  EXPECT_NE(message.find("'fp16' is not a KV dtype"), std::string::npos) << message;
  EXPECT_EQ(parse_error_code({"--kv-dtype", "fp8,fp8"}), ExitCode::usage);
  EXPECT_EQ(parse_error_code({"--dependent-launch", "1"}, &message), ExitCode::usage);
  EXPECT_NE(message.find("--dependent-launch: '1' is not a launch mode"), std::string::npos) << message;
  EXPECT_EQ(parse_error_code({"--attention-batch", "0"}), ExitCode::usage);
  EXPECT_EQ(parse_error_code({"--profile-batch", "-1"}), ExitCode::usage);
  EXPECT_EQ(parse_error_code({"--buckets", "1,64", "--profile-batch", "32"}, &message), ExitCode::usage);
  EXPECT_NE(message.find("--profile-batch: 32 is not one of the decode buckets"), std::string::npos) << message;
  EXPECT_EQ(parse_error_code({"--warmup"}, &message), ExitCode::usage);
  EXPECT_NE(message.find("--warmup needs a value"), std::string::npos) << message;
  EXPECT_EQ(parse_error_code({"--frobnicate", "1"}, &message), ExitCode::usage);
  EXPECT_NE(message.find("unknown option --frobnicate"), std::string::npos) << message;
  EXPECT_EQ(parse_error_code({"llama"}), ExitCode::usage);
  EXPECT_EQ(parse_error_code({"--buckets", "99999999999"}), ExitCode::usage);
}

TEST(BenchOptions, ValidateChecksWhatTheFlagsCannot) {
  BenchOptions o;
  EXPECT_NO_THROW(bench_options_validate(o));
  o.batches.clear();
  EXPECT_THROW(bench_options_validate(o), Error);
  o = BenchOptions{};
  o.kv_dtypes.clear();
  EXPECT_THROW(bench_options_validate(o), Error);
  o = BenchOptions{};
  o.gpu = -1;
  EXPECT_THROW(bench_options_validate(o), Error);
}

}  // namespace
}  // namespace flare::bench
