// `ignition bench`: its flags become benchmark options (one GPU, lists checked), and MODEL
// resolves to a checkpoint's weights or, for an alias whose checkpoint is absent, random weights
// of the recipe's embedded shape; models without a recipe or a shape fail with a clear code.
#include "ignition/bench_command.h"

#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "bench/shape_configs.h"
#include "common/error.h"

namespace flare::ignition {
namespace {

namespace fs = std::filesystem;

class BenchCommandTest : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("flare-bench-command-" + std::to_string(::getpid()) + "-" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "hub");
    config_ = parse_config("[paths]\nhub_cache = \"" + (root_ / "hub").string() + "\"\n", root_ / "config.toml");
  }
  void TearDown() override { fs::remove_all(root_); }

  ExitCode error_code(const std::string& selector, std::string* message = nullptr) {
    try {
      resolve_bench_model(selector, config_);
    } catch (const Error& e) {
      if (message) *message = e.what();
      return e.code();
    }
    return ExitCode::ok;
  }

  fs::path root_;
  Config config_;
};

TEST_F(BenchCommandTest, FlagsBecomeOptions) {
  BenchCommandOptions o;
  o.gpus = "1";
  o.batches = "1,64";
  o.contexts = "2048,8192";
  o.kv_dtype = "fp8";
  o.dependent_launch = "off";
  const bench::BenchOptions b = bench_options_from(o);
  EXPECT_EQ(b.gpu, 1);
  EXPECT_EQ(b.batches, (std::vector<std::int32_t>{1, 64}));
  EXPECT_EQ(b.contexts, (std::vector<std::int32_t>{2048, 8192}));
  EXPECT_EQ(b.kv_dtypes, (std::vector<helios::DType>{helios::DType::f8_e4m3}));
  EXPECT_EQ(b.backend.dependent_launch, helios::cuda::DependentLaunch::off);
  const bench::BenchOptions defaults = bench_options_from(BenchCommandOptions{});
  EXPECT_EQ(defaults.gpu, 0);
  EXPECT_EQ(defaults.backend.dependent_launch, helios::cuda::DependentLaunch::early_work);
  EXPECT_TRUE(defaults.backend.stream_gemm);
}

// --rounds is the spec's GPU graph latency benchmark: its defaults apply to what is unset, and its
// flags are checked (width 2 to 8, contexts in multiples of 128, distinct seeds, --seeds only there).
TEST_F(BenchCommandTest, RoundsTakeTheSpecsDefaultsAndCheckTheirFlags) {
  BenchCommandOptions rounds;
  rounds.bench.rounds = true;
  const bench::BenchOptions d = bench_options_from(rounds);
  EXPECT_EQ(d.batches, (std::vector<std::int32_t>{1, 2, 4}));
  EXPECT_EQ(d.contexts, (std::vector<std::int32_t>{512, 2048, 8192, 16384}));
  EXPECT_EQ(d.verify_tokens, 8);
  EXPECT_EQ(d.warmup, 5);
  EXPECT_EQ(d.repetitions, 20);
  EXPECT_EQ(d.seeds, (std::vector<std::uint64_t>{0, 1, 2}));

  rounds.batches = "1,4";
  rounds.contexts = "2048,8192";
  rounds.warmup = 2;
  rounds.repetitions = 7;
  rounds.seeds = "3,7,11";
  rounds.verify_width = 4;
  const bench::BenchOptions set = bench_options_from(rounds);
  EXPECT_EQ(set.batches, (std::vector<std::int32_t>{1, 4}));
  EXPECT_EQ(set.contexts, (std::vector<std::int32_t>{2048, 8192}));
  EXPECT_EQ(set.warmup, 2);
  EXPECT_EQ(set.repetitions, 7);
  EXPECT_EQ(set.seeds, (std::vector<std::uint64_t>{3, 7, 11}));
  EXPECT_EQ(set.verify_tokens, 4);

  const auto usage_error = [](BenchCommandOptions o, const std::string& needle) {
    try {
      bench_options_from(o);
      ADD_FAILURE() << "accepted; expected an error naming " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::usage);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  BenchCommandOptions wide = rounds;
  wide.verify_width = 9;
  usage_error(wide, "--verify-width");
  BenchCommandOptions odd_context = rounds;
  odd_context.contexts = "1000";
  usage_error(odd_context, "multiple of 128");
  BenchCommandOptions twice = rounds;
  twice.seeds = "1,1";
  usage_error(twice, "--seeds");
  BenchCommandOptions not_a_seed = rounds;
  not_a_seed.seeds = "1,-2";
  usage_error(not_a_seed, "--seeds");
  BenchCommandOptions steps;
  steps.seeds = "1";
  usage_error(steps, "--rounds");
}

TEST_F(BenchCommandTest, BadFlagsAreUsageErrors) {
  BenchCommandOptions two_gpus;
  two_gpus.gpus = "0-1";
  try {
    bench_options_from(two_gpus);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::usage);
    EXPECT_NE(std::string(e.what()).find("one GPU"), std::string::npos) << e.what();
  }
  BenchCommandOptions repeated;
  repeated.batches = "4,4";
  EXPECT_THROW(bench_options_from(repeated), Error);
  BenchCommandOptions bad_launch;
  bad_launch.dependent_launch = "always";
  EXPECT_THROW(bench_options_from(bad_launch), Error);
  BenchCommandOptions no_runs;
  no_runs.bench.repetitions = 0;
  EXPECT_THROW(bench_options_from(no_runs), Error);
}

TEST_F(BenchCommandTest, AliasWithoutCheckpointRunsItsShapeWithRandomWeights) {
  const bench::BenchModel m = resolve_bench_model("llama-3.1-8b-instruct", config_);
  EXPECT_TRUE(bench::bench_model_random_weights(m));
  EXPECT_EQ(m.name, "llama-3.1-8b");
  EXPECT_EQ(m.spec.n_layers, 32);
  EXPECT_NE(m.source.find("meta-llama/Llama-3.1-8B-Instruct"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("not present"), std::string::npos) << m.source;
}

TEST_F(BenchCommandTest, CheckpointDirectoryRunsItsWeights) {
  const fs::path dir = root_ / "my-qwen3";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << bench::find_shape_config("qwen3-8b")->config_json;
  std::ofstream(dir / "model.safetensors") << "x";
  const bench::BenchModel m = resolve_bench_model(dir.string(), config_);
  EXPECT_FALSE(bench::bench_model_random_weights(m));
  EXPECT_EQ(m.name, "qwen3-8b");  // the recipe that prepares it
  EXPECT_EQ(m.spec.n_layers, 36);
  EXPECT_EQ(m.checkpoint_dir, fs::absolute(dir));
}

TEST_F(BenchCommandTest, ModelsWithoutSupportFail) {
  std::string message;
  EXPECT_EQ(error_code("no-such-model", &message), ExitCode::usage);
  // A recipe without a checkpoint here and without a benchmark shape: the fetch error, and why.
  EXPECT_EQ(error_code("mistral-7b", &message), ExitCode::fetch);
  EXPECT_NE(message.find("no benchmark shape"), std::string::npos) << message;
  const fs::path gpt2 = root_ / "gpt2";
  fs::create_directories(gpt2);
  std::ofstream(gpt2 / "config.json") << R"({"architectures": ["GPT2LMHeadModel"]})";
  EXPECT_EQ(error_code(gpt2.string(), &message), ExitCode::usage);
  EXPECT_NE(message.find("GPT2LMHeadModel"), std::string::npos) << message;
}

}  // namespace
}  // namespace flare::ignition
