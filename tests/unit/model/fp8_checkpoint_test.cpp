// FP8 checkpoints: a fixture's projections quantized to F8_E4M3, in HF's "fp8" layout (block scales
// with partial blocks, one scale per tensor) and in the "compressed-tensors" one (tensor, channel
// and block scales, input scales beside them), read back as exactly the BF16 values they encode,
// and the model over them computes the same logits, bit for bit, as over a BF16 checkpoint of those
// values. Bad FP8 checkpoints (no scale, a misshapen or non-finite scale, a NaN weight, a weight its
// scale overflows, FP8 without the config, an FP8 norm vector) fail naming the tensor. A Qwen3-MoE
// fixture's experts quantized the same way (Qwen3 FP8 checkpoints) stay FP8 through preparation and
// loading, as stacks of FP8 matrices with stacks of scales, and the model over them computes the
// BF16 checkpoint's logits bit for bit (the CPU backend's FP8 experts).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "harness.h"
#include "helios/dtype.h"
#include "model/architecture.h"
#include "model/checkpoint.h"
#include "model/fp8_matrix.h"
#include "model/prepared_weights.h"
#include "model/spec.h"
#include "model/weight_summary.h"

namespace flare::model::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* k_fixture = "qwen3-gqa2-hd128-tied";
constexpr const char* k_moe_fixture = "qwen3moe-e8-top2-dense1";  // 8 experts of 64 x 64, top 2

struct Tensor {
  std::string name;
  package::DType dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;
};

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

void write_safetensors(const fs::path& path, const std::vector<Tensor>& tensors) {
  package::SafetensorsWriter writer(path, {});
  for (const Tensor& t : tensors) writer.declare(t.name, t.dtype, t.shape);
  for (const Tensor& t : tensors) writer.write(t.bytes);
  writer.finish();
}

bool is_projection(const std::string& name) { return name.ends_with("_proj.weight"); }

// A matrix quantized to E4M3 with one power-of-two scale per block (the whole matrix when
// block_rows is 0), and the BF16 values it dequantizes to (exact: 4 significant bits times 2^e).
struct Quantized {
  std::vector<std::uint8_t> fp8;
  std::vector<float> scales;
  std::vector<std::uint16_t> dequantized;
};

Quantized quantize(const std::vector<std::uint16_t>& bf16, std::int64_t rows, std::int64_t cols, std::int64_t block_rows,
                   std::int64_t block_cols) {
  if (block_rows == 0) block_rows = rows, block_cols = cols;
  const std::int64_t scale_rows = (rows + block_rows - 1) / block_rows, scale_cols = (cols + block_cols - 1) / block_cols;
  Quantized q;
  q.fp8.resize(bf16.size());
  q.dequantized.resize(bf16.size());
  q.scales.assign(std::size_t(scale_rows * scale_cols), 1.0f);
  for (std::int64_t br = 0; br < scale_rows; ++br) {
    for (std::int64_t bc = 0; bc < scale_cols; ++bc) {
      float max_abs = 0.0f;
      for (std::int64_t r = br * block_rows; r < std::min(rows, (br + 1) * block_rows); ++r) {
        for (std::int64_t c = bc * block_cols; c < std::min(cols, (bc + 1) * block_cols); ++c) {
          max_abs = std::max(max_abs, std::fabs(helios::bf16_to_f32(bf16[std::size_t(r * cols + c)])));
        }
      }
      const float scale = max_abs > 0 ? std::ldexp(1.0f, int(std::ceil(std::log2(max_abs / 448.0f)))) : 1.0f;
      q.scales[std::size_t(br * scale_cols + bc)] = scale;
      for (std::int64_t r = br * block_rows; r < std::min(rows, (br + 1) * block_rows); ++r) {
        for (std::int64_t c = bc * block_cols; c < std::min(cols, (bc + 1) * block_cols); ++c) {
          const std::size_t i = std::size_t(r * cols + c);
          q.fp8[i] = helios::f32_to_f8_e4m3(helios::bf16_to_f32(bf16[i]) / scale);
          const float value = helios::f8_e4m3_to_f32(q.fp8[i]) * scale;
          q.dequantized[i] = helios::f32_to_bf16(value);
          EXPECT_EQ(helios::bf16_to_f32(q.dequantized[i]), value) << "not exact in BF16";
        }
      }
    }
  }
  return q;
}

class Fp8Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(FLARE_BINARY_DIR) / "tmp" /
            ("fp8-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "fp8");
    fs::create_directories(root_ / "bf16");
    std::ifstream in(models_dir() / fixture() / "config.json");
    config_ = nlohmann::json::parse(in);
    const auto src = package::SafetensorsFile::open(models_dir() / fixture() / "model.safetensors");
    for (const auto& info : src->tensors()) {
      const auto bytes = src->tensor(info.name).bytes;
      source_.push_back({info.name, info.dtype, info.shape, std::vector<std::byte>(bytes.begin(), bytes.end())});
    }
  }
  void TearDown() override { fs::remove_all(root_); }
  virtual const char* fixture() const { return k_fixture; }

  // How write_pair stores the FP8 checkpoint.
  struct Layout {
    std::string method = "fp8";  // quant_method: "fp8" or "compressed-tensors"
    WeightQuantization::Scales scales = WeightQuantization::Scales::block;
    std::int64_t block_rows = 32, block_cols = 48;  // Scales::block
    bool flat = false;  // tensor scales as [] instead of [1], channel scales as [rows] instead of [rows, 1]
  };

  // Writes root_/fp8 (projections as E4M3 with their scales, and input scales for
  // compressed-tensors; the quantization config) and root_/bf16 (the same values dequantized, no
  // quantization config).
  void write_pair(const Layout& layout) {
    using Scales = WeightQuantization::Scales;
    const bool compressed = layout.method == "compressed-tensors";
    std::vector<Tensor> fp8, bf16;
    for (const Tensor& t : source_) {
      if (!is_projection(t.name)) {
        fp8.push_back(t);
        bf16.push_back(t);
        continue;
      }
      ASSERT_EQ(t.dtype, package::DType::bf16) << t.name;
      const std::int64_t rows = t.shape[0], cols = t.shape[1];
      std::vector<std::uint16_t> values(t.bytes.size() / 2);
      std::memcpy(values.data(), t.bytes.data(), t.bytes.size());
      const std::int64_t block_rows = layout.scales == Scales::block ? layout.block_rows
                                      : layout.scales == Scales::channel ? 1
                                                                         : 0;
      const std::int64_t block_cols = layout.scales == Scales::block ? layout.block_cols : cols;
      const Quantized q = quantize(values, rows, cols, block_rows, block_cols);
      fp8.push_back({t.name, package::DType::f8_e4m3, t.shape, bytes_of(q.fp8)});
      std::vector<std::int64_t> scale_shape;
      if (layout.scales == Scales::block) {
        scale_shape = {(rows + block_rows - 1) / block_rows, (cols + block_cols - 1) / block_cols};
      } else if (layout.scales == Scales::channel) {
        scale_shape = layout.flat ? std::vector<std::int64_t>{rows} : std::vector<std::int64_t>{rows, 1};
      } else if (!layout.flat) {
        scale_shape = {1};
      }
      fp8.push_back({t.name + (compressed ? "_scale" : "_scale_inv"), package::DType::f32, scale_shape,
                     bytes_of(q.scales)});
      if (compressed) {
        const std::string input_scale = t.name.substr(0, t.name.size() - std::string("weight").size()) + "input_scale";
        fp8.push_back({input_scale, package::DType::f32, {1}, bytes_of(std::vector<float>{0.0625f})});
      }
      bf16.push_back({t.name, package::DType::bf16, t.shape, bytes_of(q.dequantized)});
      dequantized_[t.name] = q.dequantized;
      shapes_[t.name] = t.shape;
    }
    write_safetensors(root_ / "fp8" / "model.safetensors", fp8);
    write_safetensors(root_ / "bf16" / "model.safetensors", bf16);
    nlohmann::json quantized = config_;
    if (compressed) {
      const char* strategy = layout.scales == Scales::block     ? "block"
                             : layout.scales == Scales::channel ? "channel"
                                                                : "tensor";
      nlohmann::json weights = {{"num_bits", 8}, {"type", "float"}, {"strategy", strategy}, {"symmetric", true},
                                {"dynamic", false}, {"group_size", nullptr}, {"block_structure", nullptr}};
      if (layout.scales == Scales::block) weights["block_structure"] = {layout.block_rows, layout.block_cols};
      quantized["quantization_config"] = {
          {"quant_method", "compressed-tensors"}, {"format", "float-quantized"}, {"quantization_status", "compressed"},
          {"ignore", {"lm_head"}},
          {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", weights}}}}}};
    } else {
      quantized["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}};
      if (layout.scales == Scales::block) {
        quantized["quantization_config"]["weight_block_size"] = {layout.block_rows, layout.block_cols};
      }
    }
    std::ofstream(root_ / "fp8" / "config.json", std::ios::trunc) << quantized.dump(2);
    std::ofstream(root_ / "bf16" / "config.json", std::ios::trunc) << config_.dump(2);
  }

  // Rewrites root_/fp8/model.safetensors through `edit` (which may change or drop tensors).
  void edit_fp8(const std::function<void(std::vector<Tensor>&)>& edit) {
    std::vector<Tensor> tensors;
    {
      const auto file = package::SafetensorsFile::open(root_ / "fp8" / "model.safetensors");
      for (const auto& info : file->tensors()) {
        const auto bytes = file->tensor(info.name).bytes;
        tensors.push_back({info.name, info.dtype, info.shape, std::vector<std::byte>(bytes.begin(), bytes.end())});
      }
    }
    edit(tensors);
    fs::remove(root_ / "fp8" / "model.safetensors");
    write_safetensors(root_ / "fp8" / "model.safetensors", tensors);
  }

  void expect_load_error(const fs::path& dir, const std::string& needle) {
    helios::cpu::CpuBackend backend(1);
    try {
      Model::load(dir, backend);
      ADD_FAILURE() << "loaded a bad FP8 checkpoint, expected: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(e.code(), ExitCode::preparation);
    }
  }

  // The fp8 and bf16 checkpoints give the same logits at every prompt position, and the same
  // greedy continuation.
  void expect_same_model() {
    Runner fp8(root_ / "fp8"), bf16(root_ / "bf16");
    const std::vector<std::int32_t> prompt = {3, 141, 59, 26, 53, 58, 97, 93, 23, 84, 62, 64, 33};
    helios::SequencePages a(*fp8.pool, fp8.page_size), b(*bf16.pool, bf16.page_size);
    const std::vector<float> logits_fp8 = fp8.prefill(a, prompt), logits_bf16 = bf16.prefill(b, prompt);
    ASSERT_EQ(logits_fp8.size(), logits_bf16.size());
    EXPECT_EQ(std::memcmp(logits_fp8.data(), logits_bf16.data(), logits_fp8.size() * sizeof(float)), 0);
    EXPECT_EQ(fp8.greedy(prompt, 8), bf16.greedy(prompt, 8));
  }

  fs::path root_;
  nlohmann::json config_;
  std::vector<Tensor> source_;
  std::map<std::string, std::vector<std::uint16_t>> dequantized_;
  std::map<std::string, std::vector<std::int64_t>> shapes_;
};

TEST_F(Fp8Checkpoint, BlockScalesDequantizeExactly) {
  write_pair({});  // 32 x 48 blocks over 128 x 192 and 256 x 128 projections: partial on both axes
  const ModelSpec spec = model_spec_load(root_ / "fp8");
  EXPECT_TRUE(spec.quantization.fp8);
  EXPECT_EQ(spec.quantization.block_rows, 32);
  EXPECT_EQ(spec.quantization.block_cols, 48);
  const Checkpoint ckpt = Checkpoint::open(root_ / "fp8", spec.quantization);
  ASSERT_FALSE(dequantized_.empty());
  for (const auto& [name, values] : dequantized_) EXPECT_EQ(ckpt.read_bf16(name, shapes_.at(name)), values) << name;
  expect_same_model();
}

TEST_F(Fp8Checkpoint, TensorScalesInBothShapes) {
  write_pair({.scales = WeightQuantization::Scales::tensor});
  expect_same_model();
  write_pair({.scales = WeightQuantization::Scales::tensor, .flat = true});
  expect_same_model();
}

TEST_F(Fp8Checkpoint, CompressedTensorsLayouts) {
  using Scales = WeightQuantization::Scales;
  for (const Layout& layout : {Layout{.method = "compressed-tensors", .scales = Scales::channel},
                               Layout{.method = "compressed-tensors", .scales = Scales::channel, .flat = true},
                               Layout{.method = "compressed-tensors", .scales = Scales::tensor},
                               Layout{.method = "compressed-tensors", .scales = Scales::block, .block_rows = 64,
                                      .block_cols = 64}}) {
    write_pair(layout);
    const ModelSpec spec = model_spec_load(root_ / "fp8");
    EXPECT_EQ(spec.quantization.scales, layout.scales);
    const Checkpoint ckpt = Checkpoint::open(root_ / "fp8", spec.quantization);
    for (const auto& [name, values] : dequantized_) EXPECT_EQ(ckpt.read_bf16(name, shapes_.at(name)), values) << name;
    expect_same_model();
  }
  // A channel scale of the wrong length names the scale.
  write_pair({.method = "compressed-tensors", .scales = Scales::channel});
  edit_fp8([](std::vector<Tensor>& t) {
    for (Tensor& x : t) {
      if (x.name == "model.layers.1.mlp.down_proj.weight_scale") {
        x.shape = {x.shape[0] - 1, 1};
        x.bytes.resize(x.bytes.size() - 4);
      }
    }
  });
  expect_load_error(root_ / "fp8", "`model.layers.1.mlp.down_proj.weight_scale` has shape");
}

// The prepared layout keeps each projection FP8 with its scales stacked into one block layout (a
// block per row where the fused parts had one scale each), and those FP8 values and scales stand
// for exactly the BF16 matrices a BF16 checkpoint of the same values prepares.
TEST_F(Fp8Checkpoint, PreparedWeightsKeepFp8WithStackedScales) {
  using Scales = WeightQuantization::Scales;
  struct Case {
    Layout layout;
    std::map<std::string, std::pair<std::int32_t, std::int32_t>> blocks;  // matrix -> (block rows, cols)
  };
  const std::vector<Case> cases = {
      {Layout{}, {{"qkv", {32, 48}}, {"o", {32, 48}}, {"gate_up", {32, 48}}, {"down", {32, 48}}}},
      // Tensor scales: q, k and v differ in rows (a block per row); gate and up share theirs.
      {Layout{.scales = Scales::tensor}, {{"qkv", {1, 128}}, {"o", {128, 256}}, {"gate_up", {192, 128}}, {"down", {128, 192}}}},
      {Layout{.method = "compressed-tensors", .scales = Scales::channel},
       {{"qkv", {1, 128}}, {"o", {1, 256}}, {"gate_up", {1, 128}}, {"down", {1, 192}}}},
  };
  const auto prepared = [](const fs::path& dir) {
    std::map<std::string, PreparedTensor> tensors;
    prepare_weights(model_spec_load(dir), dir, [&](PreparedGroup&& group) {
      for (PreparedTensor& t : group.tensors) tensors.emplace(t.name, std::move(t));
    });
    return tensors;
  };
  for (const Case& c : cases) {
    write_pair(c.layout);
    const auto fp8 = prepared(root_ / "fp8"), bf16 = prepared(root_ / "bf16");
    for (int layer = 0; layer < 2; ++layer) {
      for (const auto& [matrix, block] : c.blocks) {
        const std::string name = "layers." + std::to_string(layer) + "." + matrix;
        SCOPED_TRACE(name + " (" + c.layout.method + ")");
        const PreparedTensor& values = fp8.at(name);
        const PreparedTensor& scales = fp8.at(name + ".scales");
        const PreparedTensor& scale_block = fp8.at(name + ".scale_block");
        ASSERT_EQ(values.dtype, helios::DType::f8_e4m3);
        ASSERT_EQ(scale_block.dtype, helios::DType::i32);
        std::int32_t got[2];
        std::memcpy(got, scale_block.bytes.data(), sizeof got);
        EXPECT_EQ(got[0], block.first);
        EXPECT_EQ(got[1], block.second);
        const std::int64_t rows = values.shape[0], cols = values.shape[1];
        EXPECT_EQ(scales.shape, (std::vector<std::int64_t>{(rows + got[0] - 1) / got[0], (cols + got[1] - 1) / got[1]}));
        const std::vector<std::uint16_t> dequantized = fp8_dequantize_bf16(
            reinterpret_cast<const std::uint8_t*>(values.bytes.data()), reinterpret_cast<const float*>(scales.bytes.data()),
            rows, cols, got[0], got[1]);
        EXPECT_EQ(bytes_of(dequantized), bf16.at(name).bytes);
      }
    }
  }
}

// Parts whose blocks would straddle two of them (q rows not a multiple of the block rows) stay BF16.
TEST_F(Fp8Checkpoint, UnstackableScalesPrepareBf16) {
  write_pair({.block_rows = 96, .block_cols = 48});  // q 256 rows, k and v 128: not multiples of 96
  std::map<std::string, helios::DType> dtypes;
  prepare_weights(model_spec_load(root_ / "fp8"), root_ / "fp8", [&](PreparedGroup&& group) {
    for (const PreparedTensor& t : group.tensors) dtypes[t.name] = t.dtype;
  });
  EXPECT_EQ(dtypes.at("layers.0.qkv"), helios::DType::bf16);
  EXPECT_FALSE(dtypes.contains("layers.0.qkv.scales"));
  EXPECT_EQ(dtypes.at("layers.0.o"), helios::DType::f8_e4m3);  // one part: its own blocks
  expect_same_model();
}

TEST_F(Fp8Checkpoint, BadFp8CheckpointsNameTheTensor) {
  const std::string weight = "model.layers.0.self_attn.q_proj.weight", scale = weight + "_scale_inv";
  const auto find = [](std::vector<Tensor>& tensors, const std::string& name) -> Tensor& {
    for (Tensor& t : tensors) {
      if (t.name == name) return t;
    }
    throw std::runtime_error("no " + name);
  };

  write_pair({});
  edit_fp8([&](std::vector<Tensor>& t) { std::erase_if(t, [&](const Tensor& x) { return x.name == scale; }); });
  expect_load_error(root_ / "fp8", "has no `" + scale + "`");

  write_pair({});
  edit_fp8([&](std::vector<Tensor>& t) {
    Tensor& s = find(t, scale);
    s.shape = {s.shape[0] * s.shape[1]};
  });
  expect_load_error(root_ / "fp8", "`" + scale + "` has shape");

  write_pair({});
  edit_fp8([&](std::vector<Tensor>& t) {
    const float nan = std::nanf("");
    std::memcpy(find(t, scale).bytes.data(), &nan, 4);
  });
  expect_load_error(root_ / "fp8", "non-finite scale");

  write_pair({});
  edit_fp8([&](std::vector<Tensor>& t) {
    const float huge = 1e38f;  // finite, but 448 * 1e38 is not
    std::memcpy(find(t, scale).bytes.data(), &huge, 4);
    find(t, weight).bytes[0] = std::byte{0x7e};  // 448
  });
  expect_load_error(root_ / "fp8", "at [0, 0] overflows F32 with its scale");

  write_pair({});
  edit_fp8([&](std::vector<Tensor>& t) { find(t, weight).bytes[5] = std::byte{0x7f}; });  // E4M3 NaN
  expect_load_error(root_ / "fp8", "holds a NaN at [0, 5]");

  write_pair({});
  edit_fp8([&](std::vector<Tensor>& t) {
    Tensor& norm = find(t, "model.norm.weight");
    norm.dtype = package::DType::f8_e4m3;
    norm.bytes.resize(norm.bytes.size() / 2);
  });
  expect_load_error(root_ / "fp8", "`model.norm.weight` has dtype F8_E4M3");

  write_pair({});
  nlohmann::json plain = config_;  // FP8 weights, but the config does not say so
  std::ofstream(root_ / "fp8" / "config.json", std::ios::trunc) << plain.dump(2);
  expect_load_error(root_ / "fp8", "F8_E4M3 needs an FP8 quantization_config");
}

// The Qwen3-MoE fixture: every expert's gate, up and down projections are FP8 too.
class Fp8MoeCheckpoint : public Fp8Checkpoint {
 protected:
  const char* fixture() const override { return k_moe_fixture; }
};

// Expert stacks stay FP8 in the prepared layout: the stacked parts keep their blocks (32 x 32:
// several a matrix both ways) or, where blocks would straddle two experts' parts (128 x 128 over
// 64-row parts), become a block per row; the FP8 values and scales stand for exactly the BF16 stacks
// of the BF16 checkpoint. Loaded on the CPU backend they are FP8 stacks with a stack of scales per
// expert, and the logits equal the BF16 checkpoint's bit for bit.
TEST_F(Fp8MoeCheckpoint, ExpertsStayFp8AndComputeTheBf16Logits) {
  struct Case {
    Layout layout;
    std::int32_t block_rows, block_cols;  // of the prepared stacks
  };
  for (const Case& c : {Case{Layout{.block_rows = 32, .block_cols = 32}, 32, 32},
                        Case{Layout{.block_rows = 128, .block_cols = 128}, 1, 64}}) {
    SCOPED_TRACE(std::to_string(c.layout.block_rows) + " x " + std::to_string(c.layout.block_cols));
    write_pair(c.layout);
    std::map<std::string, PreparedTensor> fp8, bf16;
    for (auto [dir, out] : {std::pair{root_ / "fp8", &fp8}, std::pair{root_ / "bf16", &bf16}}) {
      prepare_weights(model_spec_load(dir), dir, [&](PreparedGroup&& group) {
        for (PreparedTensor& t : group.tensors) out->emplace(t.name, std::move(t));
      });
    }
    for (const std::string name : {"layers.0.experts.gate_up", "layers.0.experts.down", "layers.2.experts.down"}) {
      SCOPED_TRACE(name);
      const PreparedTensor& values = fp8.at(name);
      ASSERT_EQ(values.dtype, helios::DType::f8_e4m3);
      std::int32_t block[2];
      std::memcpy(block, fp8.at(name + ".scale_block").bytes.data(), sizeof block);
      EXPECT_EQ(block[0], c.block_rows);
      EXPECT_EQ(block[1], c.block_cols);
      const std::int64_t rows = values.shape[0], cols = values.shape[1];
      EXPECT_EQ(rows, name.ends_with("gate_up") ? 8 * 128 : 8 * 64);  // 8 experts' matrices stacked
      const std::vector<std::uint16_t> dequantized =
          fp8_dequantize_bf16(reinterpret_cast<const std::uint8_t*>(values.bytes.data()),
                              reinterpret_cast<const float*>(fp8.at(name + ".scales").bytes.data()), rows, cols,
                              block[0], block[1]);
      EXPECT_EQ(bytes_of(dequantized), bf16.at(name).bytes);
    }
    EXPECT_EQ(fp8.at("layers.0.router").dtype, helios::DType::bf16);  // the router is not quantized
    if (c.block_rows == 32) {
      // Expert bytes at stored precision, as `flare inspect` counts them: a byte a value, an f32
      // scale per 32 x 32 block and the block shape, for the two expert layers (0 and 2); a decode
      // step reads top_k (2) of each stack's 8 experts.
      const WeightSummary summary = weight_summary(model_spec_load(root_ / "fp8"), [&](std::string_view name) {
        std::uint64_t bytes = 0;
        for (const std::string suffix : {"", ".scales", ".scale_block"}) {
          const auto it = fp8.find(std::string(name) + suffix);
          if (it != fp8.end()) bytes += it->second.bytes.size();
        }
        return bytes;
      });
      const std::uint64_t gate_up = 8 * 128 * 64 + (8 * 128 / 32) * (64 / 32) * 4 + 8;
      const std::uint64_t down = 8 * 64 * 64 + (8 * 64 / 32) * (64 / 32) * 4 + 8;
      EXPECT_EQ(summary.expert_bytes, 2 * (gate_up + down));
      const WeightSummary bf16_summary = weight_summary(model_spec_load(root_ / "bf16"), [&](std::string_view name) {
        const auto it = bf16.find(std::string(name));
        return it != bf16.end() ? std::uint64_t(it->second.bytes.size()) : 0;
      });
      EXPECT_EQ(bf16_summary.expert_bytes, 2 * 2 * 8 * (128 * 64 + 64 * 64));
      // The memory plan counts the FP8 experts as the package stores them, before reading any weight.
      const ModelSpec spec = model_spec_load(root_ / "fp8");
      const WeightTable table = architecture_of(spec).weight_table(spec);
      EXPECT_EQ(table.prepared_bytes() - table.prepared_bytes(spec.quantization),
                bf16_summary.expert_bytes - summary.expert_bytes);
      EXPECT_EQ(bf16_summary.decode_weight_bytes - summary.decode_weight_bytes,
                (bf16_summary.stored_bytes - summary.stored_bytes) -
                    (bf16_summary.expert_bytes - summary.expert_bytes) * 6 / 8);  // 6 of 8 experts unread
    }

    helios::cpu::CpuBackend backend(1);
    const std::unique_ptr<Model> model = Model::load(root_ / "fp8", backend);
    for (const std::string name : {"layers.0.experts.gate_up", "layers.2.experts.down"}) {
      const Weight& w = model->weights().at(name);
      EXPECT_EQ(w.values.dtype, helios::DType::f8_e4m3) << name;
      EXPECT_EQ(w.values.n_batch, 8) << name;
      EXPECT_EQ(w.quant.format, helios::QuantizedWeight::Format::fp8_e4m3) << name;
      EXPECT_EQ(w.quant.scales.n_batch, 8) << name;
      EXPECT_EQ(w.quant.block_rows, c.block_rows) << name;
    }
    expect_same_model();
  }
}

}  // namespace
}  // namespace flare::model::testing
