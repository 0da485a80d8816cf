// Reads a Hugging Face checkpoint directory: one model.safetensors, or shards listed by
// model.safetensors.index.json. Files are memory-mapped through package::SafetensorsFile (never
// copied whole into RAM); a tensor is converted to BF16 or F32 only when asked for, with its shape
// checked. With FP8 weight quantization (spec.h), read_bf16 also takes F8_E4M3 matrices and
// dequantizes them with their `<name>_scale_inv`. Every problem (bad index, missing shard or tensor,
// wrong shape or dtype, a missing or misshapen scale, a non-finite weight, scale or product, truncated file)
// is a flare::Error (preparation) that names the file and the tensor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/fp8_matrix.h"
#include "model/spec.h"
#include "package/safetensors.h"

namespace flare::model {

// An MXFP4 matrix as a checkpoint stores it (helios/mxfp4.h): two E2M1 values a byte, one E8M0
// scale per 32 values of a row.
struct Mxfp4Matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::uint8_t> values;  // [rows, cols / 2]
  std::vector<std::uint8_t> scales;  // [rows, cols / 32]
};

class Checkpoint {
 public:
  static Checkpoint open(const std::filesystem::path& dir, WeightQuantization quantization = {});

  const std::filesystem::path& dir() const { return dir_; }
  bool has(const std::string& name) const { return locations_.count(name) != 0; }
  std::vector<std::string> tensor_names() const;
  // The tensor's info, checked against `shape`; throws naming the tensor when absent or different.
  const package::TensorInfo& expect(const std::string& name, const std::vector<std::int64_t>& shape) const;
  // Element data converted from BF16, F16 or F32 (shape checked as in expect()); read_bf16 also
  // dequantizes an F8_E4M3 matrix when the checkpoint's weights are FP8.
  std::vector<std::uint16_t> read_bf16(const std::string& name, const std::vector<std::int64_t>& shape) const;
  std::vector<float> read_f32(const std::string& name, const std::vector<std::int64_t>& shape) const;
  // Whether `name` is an F8_E4M3 matrix of an FP8 checkpoint (read_fp8 takes it as stored).
  bool is_fp8(const std::string& name) const;
  // An FP8 matrix as stored, with its scales in block form (checked as read_bf16 checks them).
  Fp8Matrix read_fp8(const std::string& name, const std::vector<std::int64_t>& shape) const;
  // An MXFP4 matrix [rows, cols] as stored: `<name>_blocks` U8 [rows, cols / 32, 16] and
  // `<name>_scales` U8 [rows, cols / 32] (gpt-oss's layout; leading dimensions may be split, as an
  // expert stack's [E, rows / E, ...]).
  Mxfp4Matrix read_mxfp4(const std::string& name, std::int64_t rows, std::int64_t cols) const;
  // Shapes a read accepts: equal, or equal once the stored shape's leading dimensions are merged.
  static bool shape_matches(const std::vector<std::int64_t>& stored, const std::vector<std::int64_t>& wanted);

 private:
  std::filesystem::path dir_;
  std::vector<std::shared_ptr<package::SafetensorsFile>> files_;
  std::map<std::string, std::size_t> locations_;  // tensor name -> index in files_
  WeightQuantization quantization_;
  package::TensorView view(const std::string& name, const std::vector<std::int64_t>& shape) const;
};

}  // namespace flare::model
