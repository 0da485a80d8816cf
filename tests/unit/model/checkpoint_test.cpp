// Checkpoint reading: single and sharded files, BF16/F16/F32 sources, and bad checkpoints (missing
// tensor, wrong shape, wrong dtype, truncated shard, bad or hostile index) failing with a message
// that names the problem.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "common/error.h"
#include "harness.h"
#include "model/checkpoint.h"

namespace flare::model::testing {
namespace {

namespace fs = std::filesystem;

class BadCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(FLARE_BINARY_DIR) / "tmp" / ("checkpoint-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void copy_fixture(const std::string& name) {
    for (const auto& entry : fs::directory_iterator(models_dir() / name)) fs::copy_file(entry.path(), dir_ / entry.path().filename());
  }

  // Rewrites dir_/file through `edit(name, shape, keep)`: edit may change the shape or drop the tensor.
  void rewrite(const std::string& file,
               const std::function<void(const std::string&, std::vector<std::int64_t>&, bool&)>& edit) {
    const auto src = package::SafetensorsFile::open(dir_ / file);
    std::vector<std::tuple<std::string, package::DType, std::vector<std::int64_t>, std::vector<std::byte>>> kept;
    for (const auto& info : src->tensors()) {
      std::vector<std::int64_t> shape = info.shape;
      bool keep = true;
      edit(info.name, shape, keep);
      if (!keep) continue;
      auto bytes = src->tensor(info.name).bytes;
      std::vector<std::byte> data(bytes.begin(), bytes.end());
      std::size_t n = package::dtype_size_bytes(info.dtype);
      for (auto d : shape) n *= std::size_t(d);
      data.resize(n);
      kept.emplace_back(info.name, info.dtype, shape, std::move(data));
    }
    fs::remove(dir_ / file);
    package::SafetensorsWriter writer(dir_ / file, {});
    for (auto& [name, dtype, shape, data] : kept) writer.declare(name, dtype, shape);
    for (auto& [name, dtype, shape, data] : kept) writer.write(data);
    writer.finish();
  }

  void expect_load_error(const std::string& needle) {
    cpu_backend_ = std::make_unique<helios::cpu::CpuBackend>(1);
    try {
      Model::load(dir_, *cpu_backend_);
      ADD_FAILURE() << "loaded a bad checkpoint";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }

  void write_text(const std::string& file, const std::string& text) { std::ofstream(dir_ / file, std::ios::trunc) << text; }

  fs::path dir_;
  std::unique_ptr<helios::cpu::CpuBackend> cpu_backend_;
};

TEST_F(BadCheckpoint, GoodCopiesLoad) {
  copy_fixture("llama-gqa2-hd64-untied-sharded");
  helios::cpu::CpuBackend backend(1);
  EXPECT_NO_THROW(Model::load(dir_, backend));
  const Checkpoint ckpt = Checkpoint::open(dir_);
  EXPECT_TRUE(ckpt.has("lm_head.weight"));
  EXPECT_EQ(ckpt.read_f32("model.norm.weight", {128}).size(), 128u);
}

TEST_F(BadCheckpoint, MissingTensorIsNamed) {
  copy_fixture("qwen3-gqa2-hd128-tied");
  rewrite("model.safetensors", [](const std::string& name, auto&, bool& keep) {
    keep = name != "model.layers.1.self_attn.k_norm.weight";
  });
  expect_load_error("`model.layers.1.self_attn.k_norm.weight` is missing");
}

TEST_F(BadCheckpoint, WrongShapeIsNamed) {
  copy_fixture("qwen2-gqa2-hd64-bias");
  rewrite("model.safetensors", [](const std::string& name, std::vector<std::int64_t>& shape, bool&) {
    if (name == "model.layers.0.mlp.up_proj.weight") shape = {191, 128};
  });
  expect_load_error("`model.layers.0.mlp.up_proj.weight` has shape [191, 128], expected [192, 128]");
}

TEST_F(BadCheckpoint, ConfigThatDisagreesWithTheWeights) {
  copy_fixture("mistral-gqa2-hd64-window8");
  std::ifstream in(dir_ / "config.json");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  text.replace(text.find("\"intermediate_size\": 192"), 24, "\"intermediate_size\": 256");
  write_text("config.json", text);
  expect_load_error("expected [256, 128]");
}

TEST_F(BadCheckpoint, TruncatedShardIsNamed) {
  copy_fixture("llama-gqa2-hd64-untied-sharded");
  const auto shard = dir_ / "model-00003-of-00006.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 100);
  expect_load_error("model-00003-of-00006.safetensors");
}

TEST_F(BadCheckpoint, MissingShardIsNamed) {
  copy_fixture("llama-gqa2-hd64-untied-sharded");
  fs::remove(dir_ / "model-00006-of-00006.safetensors");
  expect_load_error("model-00006-of-00006.safetensors");
}

TEST_F(BadCheckpoint, BadIndexes) {
  copy_fixture("llama-gqa2-hd64-untied-sharded");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "not valid JSON"},
      {"[]", "weight_map"},
      {R"({"metadata": {}})", "weight_map"},
      {R"({"weight_map": []})", "weight_map"},
      {R"({"weight_map": {}})", "lists no tensors"},
      {R"({"weight_map": {"lm_head.weight": 7}})", "lm_head.weight"},
      {R"({"weight_map": {"lm_head.weight": "../model-00006-of-00006.safetensors"}})", "is not a file name"},
      {R"({"weight_map": {"lm_head.weight": "/etc/passwd"}})", "is not a file name"},
      {R"({"weight_map": {"lm_head.weight": "model-00001-of-00006.safetensors"}})", "does not hold it"},
      {R"({"weight_map": {"lm_head.weight": "nope.safetensors"}})", "does not exist"},
  };
  for (const auto& [text, needle] : cases) {
    write_text("model.safetensors.index.json", text);
    expect_load_error(needle);
  }
  // A valid index that omits a tensor the model needs.
  write_text("model.safetensors.index.json", R"({"weight_map": {"lm_head.weight": "model-00006-of-00006.safetensors"}})");
  expect_load_error("is missing");
}

TEST_F(BadCheckpoint, NoWeightsAtAll) {
  fs::copy_file(models_dir() / "qwen3-gqa2-hd128-tied" / "config.json", dir_ / "config.json");
  expect_load_error("no model.safetensors");
  fs::remove(dir_ / "config.json");
  expect_load_error("config.json");
}

TEST_F(BadCheckpoint, UnsupportedDtypeIsNamed) {
  copy_fixture("qwen3-gqa2-hd128-tied");
  const auto src = package::SafetensorsFile::open(dir_ / "model.safetensors");
  std::vector<std::tuple<std::string, package::DType, std::vector<std::int64_t>, std::vector<std::byte>>> all;
  for (const auto& info : src->tensors()) {
    auto bytes = src->tensor(info.name).bytes;
    const bool i16 = info.name == "model.norm.weight";
    all.emplace_back(info.name, i16 ? package::DType::i16 : info.dtype, info.shape, std::vector<std::byte>(bytes.begin(), bytes.end()));
  }
  fs::remove(dir_ / "model.safetensors");
  package::SafetensorsWriter writer(dir_ / "model.safetensors", {});
  for (auto& [name, dtype, shape, data] : all) writer.declare(name, dtype, shape);
  for (auto& [name, dtype, shape, data] : all) writer.write(data);
  writer.finish();
  expect_load_error("`model.norm.weight` has dtype I16");
}

}  // namespace
}  // namespace flare::model::testing
