#include "common/cli.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/config.h"
#include "common/error.h"

namespace flare {
namespace {

struct TestProgram {
  std::unique_ptr<CLI::App> app = make_app("prog", "A test program.");
  GlobalOptions global;
  std::string model;
  int value = 7;
  int n_runs = 0;

  TestProgram() {
    CLI::App* run = add_command(*app, "run", "Run a thing.", [this] {
      ++n_runs;
      load_config(global.config);  // a real command reads its configuration
      return value == 42 ? 5 : 0;
    });
    run->add_option("--config", global.config, "Configuration file");
    run->add_option("MODEL", model, "The model");
    run->add_option("--value", value, "A value");
  }

  int operator()(std::vector<std::string> args) {
    std::vector<char*> argv;
    std::string name = "prog";
    argv.push_back(name.data());
    for (auto& arg : args) argv.push_back(arg.data());
    return run_cli(*app, static_cast<int>(argv.size()), argv.data());
  }
};

std::filesystem::path broken_config() {
  const auto path = std::filesystem::temp_directory_path() / "flare-cli-test-broken.toml";
  std::ofstream(path) << "[server\nthis is not toml";
  return path;
}

TEST(Cli, OptionsBeforeAndAfterPositionals) {
  TestProgram program;
  EXPECT_EQ(program({"run", "--value", "3", "demo"}), 0);
  EXPECT_EQ(program.model, "demo");
  EXPECT_EQ(program.value, 3);
  TestProgram second;
  EXPECT_EQ(second({"run", "demo", "--value=4"}), 0);
  EXPECT_EQ(second.model, "demo");
  EXPECT_EQ(second.value, 4);
}

TEST(Cli, HelpAnywhereNeverRunsTheCommandOrReadsConfig) {
  const auto config = broken_config();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"-h"}, {"help"}, {"help", "run"}, {"run", "--help"},
        {"run", "demo", "-h"}, {"run", "--config", config.string(), "demo", "--help"},
        {"run", "--value", "notanumber", "--help"}, {"run", "--config=" + config.string(), "-h"}}) {
    TestProgram program;
    testing::internal::CaptureStdout();
    EXPECT_EQ(program(args), 0);
    const std::string out = testing::internal::GetCapturedStdout();
    EXPECT_EQ(program.n_runs, 0);
    EXPECT_NE(out.find("Usage"), std::string::npos) << out;
  }
  TestProgram program;
  testing::internal::CaptureStdout();
  program({"help", "run"});
  EXPECT_NE(testing::internal::GetCapturedStdout().find("--value"), std::string::npos);
}

TEST(Cli, UsageErrorsExitTwo) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"rnu"}, {"run", "--bogus"}, {"run", "--value", "x"}, {"run", "a", "b"}, {}}) {
    TestProgram program;
    testing::internal::CaptureStderr();
    EXPECT_EQ(program(args), 2);
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(program.n_runs, 0);
    if (!args.empty()) {
      EXPECT_NE(err.find("error: "), std::string::npos) << err;
    }
  }
  TestProgram program;
  testing::internal::CaptureStderr();
  program({"rnu"});
  EXPECT_NE(testing::internal::GetCapturedStderr().find("did you mean 'run'"), std::string::npos);
}

TEST(Cli, ErrorsCarryTheirExitCodes) {
  TestProgram program;
  EXPECT_EQ(program({"run", "--value", "42"}), 5);
  TestProgram broken;
  testing::internal::CaptureStderr();
  EXPECT_EQ(broken({"run", "--config", broken_config().string()}), 2);
  EXPECT_NE(testing::internal::GetCapturedStderr().find("invalid configuration"), std::string::npos);
}

}  // namespace
}  // namespace flare
