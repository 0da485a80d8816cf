#include "ignition/resolve.h"

#include <algorithm>

#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"

namespace flare::ignition {
namespace {

namespace fs = std::filesystem;

class ResolveTest : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("flare-resolve-" + std::to_string(::getpid()) + "-" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "hub");
    fs::create_directories(root_ / "assets");
    config_ = parse_config("[paths]\nhub_cache = \"" + (root_ / "hub").string() + "\"\n", root_ / "config.toml");
  }
  void TearDown() override { fs::remove_all(root_); }

  static void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  static void make_checkpoint(const fs::path& dir, const std::string& architecture) {
    write(dir / "config.json", "{\"architectures\": [\"" + architecture + "\"]}");
    write(dir / "model.safetensors", "x");
  }
  fs::path snapshot(const std::string& repo_dir, const std::string& commit) {
    return root_ / "hub" / repo_dir / "snapshots" / commit;
  }

  fs::path root_;
  Config config_;
};

const std::string kQwenCommit = "b968826d9c46dd6066d109eabc6255188de91218";

TEST_F(ResolveTest, LocalDirectoryUsesTheRecipeOfItsArchitecture) {
  make_checkpoint(root_ / "my-llama", "LlamaForCausalLM");
  const auto resolved = resolve_model((root_ / "my-llama").string(), config_, root_ / "assets");
  EXPECT_EQ(resolved.recipe->name, "llama-3.1-8b-instruct");
  EXPECT_EQ(resolved.revision, "local");
  EXPECT_FALSE(resolved.qualified);
  EXPECT_EQ(resolved.served_names.front(), "my-llama");
}

TEST_F(ResolveTest, UnsupportedArchitectureIsAUsageError) {
  make_checkpoint(root_ / "gpt2", "GPT2LMHeadModel");
  try {
    resolve_model((root_ / "gpt2").string(), config_, root_ / "assets");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    EXPECT_NE(std::string(error.what()).find("GPT2LMHeadModel"), std::string::npos);
  }
}

TEST_F(ResolveTest, BrokenConfigIsAPreparationError) {
  write(root_ / "broken" / "config.json", "{not json");
  try {
    resolve_model((root_ / "broken").string(), config_, root_ / "assets");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::preparation);
  }
}

TEST_F(ResolveTest, DeclaredRepositoryAtItsPinnedRevision) {
  make_checkpoint(snapshot("models--Qwen--Qwen3-8B", kQwenCommit), "Qwen3ForCausalLM");
  const auto resolved = resolve_model("qwen/qwen3-8b", config_, root_ / "assets");
  EXPECT_TRUE(resolved.qualified);
  EXPECT_EQ(resolved.revision, kQwenCommit);
  EXPECT_EQ(resolved.served_names.front(), "Qwen3-8B");
  const auto by_alias = resolve_model("qwen3-8b", config_, root_ / "assets");
  EXPECT_EQ(by_alias.checkpoint_dir, resolved.checkpoint_dir);
}

TEST_F(ResolveTest, RefsResolveToCommitsAndCaseVariantsAreFound) {
  const std::string commit(40, 'a');
  make_checkpoint(snapshot("models--SomeOrg--Tiny-Llama", commit), "LlamaForCausalLM");
  write(root_ / "hub" / "models--SomeOrg--Tiny-Llama" / "refs" / "main", commit + "\n");
  const auto resolved = resolve_model("someorg/tiny-llama", config_, root_ / "assets");
  EXPECT_EQ(resolved.revision, commit);
  EXPECT_EQ(resolved.recipe->name, "llama-3.1-8b-instruct");
  EXPECT_FALSE(resolved.qualified);
  // Named after the repository in a form that can key the model cache; ORG/NAME is still served.
  EXPECT_EQ(resolved.served_names.front(), "someorg--tiny-llama");
  EXPECT_NE(std::find(resolved.served_names.begin(), resolved.served_names.end(), "someorg/tiny-llama"),
            resolved.served_names.end());
}

TEST_F(ResolveTest, IncompleteExactCaseDoesNotHideACompleteVariant) {
  const std::string commit(40, 'b');
  fs::create_directories(snapshot("models--Org--Model", commit));  // no files: incomplete
  make_checkpoint(snapshot("models--org--model", commit), "MistralForCausalLM");
  const auto resolved = resolve_model("Org/Model@" + commit, config_, root_ / "assets");
  EXPECT_EQ(resolved.checkpoint_dir, snapshot("models--org--model", commit));
}

TEST_F(ResolveTest, MissingSnapshotIsAFetchError) {
  for (const std::string selector : {"Qwen/Qwen3-8B", "qwen3-8b", "org/absent@main"}) {
    try {
      resolve_model(selector, config_, root_ / "assets");
      FAIL() << selector;
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::fetch) << selector;
    }
  }
}

TEST_F(ResolveTest, ShardedSnapshotNeedsEveryShard) {
  const std::string commit(40, 'c');
  const fs::path dir = snapshot("models--org--sharded", commit);
  write(dir / "config.json", R"({"architectures": ["LlamaForCausalLM"]})");
  write(dir / "model.safetensors.index.json",
        R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  write(dir / "model-00001-of-00002.safetensors", "x");
  EXPECT_FALSE(snapshot_complete(dir));
  write(dir / "model-00002-of-00002.safetensors", "x");
  EXPECT_TRUE(snapshot_complete(dir));
  write(dir / "model.safetensors.index.json", R"({"weight_map": {"a": "../../escape.safetensors"}})");
  EXPECT_FALSE(snapshot_complete(dir));
}

TEST_F(ResolveTest, UnknownAliasSuggestsACloseMatch) {
  try {
    resolve_model("qwen3-8", config_, root_ / "assets");
    FAIL();
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    EXPECT_NE(std::string(error.what()).find("did you mean 'qwen3-8b'"), std::string::npos) << error.what();
  }
  for (const std::string bad : {"org/", "/name", "a/b/c", "org/name@", "org/../x"}) {
    EXPECT_THROW(resolve_model(bad, config_, root_ / "assets"), Error) << bad;
  }
}

TEST_F(ResolveTest, BundledDemo) {
  make_checkpoint(root_ / "assets" / "demo-model", "Qwen3ForCausalLM");
  const auto resolved = resolve_model("demo", config_, root_ / "assets");
  EXPECT_EQ(resolved.recipe->name, "demo");
  EXPECT_EQ(resolved.served_names.front(), "flare-demo-coder");
  EXPECT_TRUE(resolved.qualified);
  fs::remove_all(root_ / "assets" / "demo-model");
  EXPECT_THROW(resolve_model("demo", config_, root_ / "assets"), Error);
}

}  // namespace
}  // namespace flare::ignition
