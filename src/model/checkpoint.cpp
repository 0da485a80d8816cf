// Checkpoint directory reader (see checkpoint.h).
#include "model/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "helios/dtype.h"

namespace flare::model {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Shard names from the index must be plain file names inside the directory.
void check_shard_name(const std::filesystem::path& index, const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name.find('\\') != std::string::npos ||
      name == "." || name == ".." || name.find('\0') != std::string::npos) {
    fail(ExitCode::preparation, "{}: shard name \"{}\" is not a file name in the checkpoint directory", index.string(), name);
  }
}

std::map<std::string, std::string> read_index(const std::filesystem::path& index) {
  std::ifstream in(index, std::ios::binary);
  if (!in) fail(ExitCode::preparation, "{}: cannot be read", index.string());
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    fail(ExitCode::preparation, "{}: not valid JSON: {}", index.string(), e.what());
  }
  if (!json.is_object() || !json.contains("weight_map") || !json.at("weight_map").is_object()) {
    fail(ExitCode::preparation, "{}: `weight_map` is missing or not an object", index.string());
  }
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : json.at("weight_map").items()) {
    if (!file.is_string()) fail(ExitCode::preparation, "{}: weight_map entry for `{}` is not a file name", index.string(), name);
    check_shard_name(index, file.get<std::string>());
    out[name] = file.get<std::string>();
  }
  if (out.empty()) fail(ExitCode::preparation, "{}: `weight_map` lists no tensors", index.string());
  return out;
}

}  // namespace

Checkpoint Checkpoint::open(const std::filesystem::path& dir, WeightQuantization quantization) {
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  ckpt.quantization_ = quantization;
  const auto index = dir / "model.safetensors.index.json";
  const auto single = dir / "model.safetensors";
  if (std::filesystem::exists(index)) {
    const auto weight_map = read_index(index);
    std::map<std::string, std::size_t> file_ids;
    for (const auto& [name, file] : weight_map) {
      auto [it, inserted] = file_ids.emplace(file, ckpt.files_.size());
      if (inserted) {
        if (!std::filesystem::exists(dir / file)) {
          fail(ExitCode::preparation, "{}: shard {} (holding `{}`) does not exist", index.string(), file, name);
        }
        ckpt.files_.push_back(package::SafetensorsFile::open(dir / file));
      }
      if (!ckpt.files_[it->second]->find(name)) {
        fail(ExitCode::preparation, "{}: tensor `{}` is listed in {} but that file does not hold it", index.string(), name,
             file);
      }
      ckpt.locations_[name] = it->second;
    }
  } else if (std::filesystem::exists(single)) {
    ckpt.files_.push_back(package::SafetensorsFile::open(single));
    for (const auto& info : ckpt.files_[0]->tensors()) ckpt.locations_[info.name] = 0;
  } else {
    fail(ExitCode::preparation, "{}: no model.safetensors or model.safetensors.index.json", dir.string());
  }
  return ckpt;
}

// `stored` equals `wanted` up to merging leading dimensions: a stack of experts [E, rows, cols]
// reads as the matrix [E * rows, cols], a stack of biases [E, n] as the vector [E * n].
bool Checkpoint::shape_matches(const std::vector<std::int64_t>& stored, const std::vector<std::int64_t>& wanted) {
  if (stored == wanted) return true;
  if (wanted.empty() || stored.size() <= wanted.size()) return false;
  const std::size_t merged = stored.size() - wanted.size() + 1;  // stored dims making up wanted[0]
  std::int64_t leading = 1;
  for (std::size_t i = 0; i < merged; ++i) leading *= stored[i];
  return leading == wanted[0] && std::equal(wanted.begin() + 1, wanted.end(), stored.begin() + std::ptrdiff_t(merged));
}

Mxfp4Matrix Checkpoint::read_mxfp4(const std::string& name, std::int64_t rows, std::int64_t cols) const {
  if (cols % 32 != 0) fail(ExitCode::preparation, "checkpoint {}: MXFP4 tensor `{}` has {} columns, not a multiple of 32", dir_.string(), name, cols);
  Mxfp4Matrix m;
  m.rows = rows;
  m.cols = cols;
  for (const bool blocks : {true, false}) {
    const std::string part = name + (blocks ? "_blocks" : "_scales");
    auto it = locations_.find(part);
    if (it == locations_.end()) fail(ExitCode::preparation, "checkpoint {}: MXFP4 tensor `{}` is missing", dir_.string(), part);
    const package::TensorView view = files_[it->second]->tensor(part);
    const std::vector<std::int64_t> wanted = blocks ? std::vector<std::int64_t>{rows, cols / 32, 16}
                                                    : std::vector<std::int64_t>{rows, cols / 32};
    if (view.info->dtype != package::DType::u8 || !shape_matches(view.info->shape, wanted)) {
      fail(ExitCode::preparation, "checkpoint {}: MXFP4 tensor `{}` is {} {}, expected U8 {} (leading dimensions may be split)",
           dir_.string(), part, package::dtype_name(view.info->dtype), shape_text(view.info->shape), shape_text(wanted));
    }
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(view.bytes.data());
    (blocks ? m.values : m.scales).assign(bytes, bytes + view.bytes.size());
  }
  return m;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> out;
  for (const auto& [name, file] : locations_) out.push_back(name);
  return out;
}

const package::TensorInfo& Checkpoint::expect(const std::string& name, const std::vector<std::int64_t>& shape) const {
  auto it = locations_.find(name);
  if (it == locations_.end()) fail(ExitCode::preparation, "checkpoint {}: tensor `{}` is missing", dir_.string(), name);
  const package::TensorInfo* info = files_[it->second]->find(name);
  if (!shape_matches(info->shape, shape)) {
    fail(ExitCode::preparation, "checkpoint {}: tensor `{}` has shape {}, expected {}", dir_.string(), name,
         shape_text(info->shape), shape_text(shape));
  }
  using package::DType;
  const bool fp8_matrix = quantization_.fp8 && info->dtype == DType::f8_e4m3 && shape.size() == 2;
  if (info->dtype != DType::bf16 && info->dtype != DType::f16 && info->dtype != DType::f32 && !fp8_matrix) {
    fail(ExitCode::preparation, "checkpoint {}: tensor `{}` has dtype {} (supported: BF16, F16, F32{})", dir_.string(),
         name, package::dtype_name(info->dtype),
         quantization_.fp8 ? ", and F8_E4M3 for weight matrices" : "; F8_E4M3 needs an FP8 quantization_config");
  }
  return *info;
}

package::TensorView Checkpoint::view(const std::string& name, const std::vector<std::int64_t>& shape) const {
  expect(name, shape);
  return files_[locations_.at(name)]->tensor(name);
}

std::vector<float> Checkpoint::read_f32(const std::string& name, const std::vector<std::int64_t>& shape) const {
  const package::TensorView view = this->view(name, shape);
  if (view.info->dtype == package::DType::f8_e4m3) {
    fail(ExitCode::preparation, "checkpoint {}: tensor `{}` is F8_E4M3 where a BF16, F16 or F32 tensor is expected",
         dir_.string(), name);
  }
  const std::size_t n = std::size_t(view.info->n_elements());
  std::vector<float> out(n);
  const std::byte* src = view.bytes.data();
  for (std::size_t i = 0; i < n; ++i) {
    switch (view.info->dtype) {
      case package::DType::bf16: {
        std::uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = helios::bf16_to_f32(bits);
        break;
      }
      case package::DType::f16: {
        std::uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = helios::f16_to_f32(bits);
        break;
      }
      default: std::memcpy(&out[i], src + 4 * i, 4); break;
    }
  }
  return out;
}

std::vector<std::uint16_t> Checkpoint::read_bf16(const std::string& name, const std::vector<std::int64_t>& shape) const {
  const package::TensorView view = this->view(name, shape);
  const std::size_t n = std::size_t(view.info->n_elements());
  std::vector<std::uint16_t> out(n);
  if (view.info->dtype == package::DType::bf16) {
    std::memcpy(out.data(), view.bytes.data(), 2 * n);
    return out;
  }
  if (view.info->dtype == package::DType::f8_e4m3) return fp8_dequantize_bf16(read_fp8(name, shape));
  const std::vector<float> f32 = read_f32(name, shape);
  for (std::size_t i = 0; i < n; ++i) out[i] = helios::f32_to_bf16(f32[i]);
  return out;
}

bool Checkpoint::is_fp8(const std::string& name) const {
  const auto it = locations_.find(name);
  return quantization_.fp8 && it != locations_.end() && files_[it->second]->find(name)->dtype == package::DType::f8_e4m3;
}

// weight[r][c] = e4m3[r][c] * scale[r / block_rows][c / block_cols]; a tensor scale is one block of
// the whole matrix, a channel scale one block per row. No NaN weight, no non-finite scale and no
// product past F32 get through.
Fp8Matrix Checkpoint::read_fp8(const std::string& name, const std::vector<std::int64_t>& shape) const {
  using Scales = WeightQuantization::Scales;
  const package::TensorView weight = view(name, shape);
  if (weight.info->dtype != package::DType::f8_e4m3) {
    fail(ExitCode::preparation, "checkpoint {}: tensor `{}` is {}, not F8_E4M3", dir_.string(), name,
         package::dtype_name(weight.info->dtype));
  }
  Fp8Matrix m;
  m.rows = weight.info->shape[0];
  m.cols = weight.info->shape[1];
  const std::string scale_name = name + quantization_.scale_suffix;
  const Scales layout = quantization_.scales;
  m.block_rows = layout == Scales::block ? quantization_.block_rows : layout == Scales::channel ? 1 : m.rows;
  m.block_cols = layout == Scales::block ? quantization_.block_cols : m.cols;
  if (!has(scale_name)) {
    fail(ExitCode::preparation, "checkpoint {}: FP8 tensor `{}` has no `{}`", dir_.string(), name, scale_name);
  }
  // The stored shape: [scale rows, scale columns], or the forms the layouts also use (a scalar or
  // [1] for one scale, [rows] for channel scales); anything else fails in read_f32 naming both.
  std::vector<std::int64_t> scale_shape = {m.scale_rows(), m.scale_cols()};
  const std::vector<std::int64_t> stored = files_[locations_.at(scale_name)]->find(scale_name)->shape;
  if ((layout == Scales::tensor && (stored.empty() || stored == std::vector<std::int64_t>{1})) ||
      (layout == Scales::channel && stored == std::vector<std::int64_t>{m.rows})) {
    scale_shape = stored;
  }
  m.scales = read_f32(scale_name, scale_shape);
  for (const float s : m.scales) {
    if (!std::isfinite(s)) fail(ExitCode::preparation, "checkpoint {}: `{}` holds a non-finite scale", dir_.string(), scale_name);
  }
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(weight.bytes.data());
  m.values.assign(bytes, bytes + m.rows * m.cols);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    const float* scale_row = m.scales.data() + (r / m.block_rows) * m.scale_cols();
    for (std::int64_t c = 0; c < m.cols; ++c) {
      const float value = helios::f8_e4m3_to_f32(m.values[std::size_t(r * m.cols + c)]);
      if (!std::isfinite(value)) {
        fail(ExitCode::preparation, "checkpoint {}: FP8 tensor `{}` holds a NaN at [{}, {}]", dir_.string(), name, r, c);
      }
      if (!std::isfinite(value * scale_row[c / m.block_cols])) {
        fail(ExitCode::preparation, "checkpoint {}: FP8 tensor `{}` at [{}, {}] overflows F32 with its scale", dir_.string(),
             name, r, c);
      }
    }
  }
  return m;
}

}  // namespace flare::model
