#include "model/fp8_matrix.h"

#include "helios/dtype.h"

namespace flare::model {

std::vector<std::uint16_t> fp8_dequantize_bf16(const std::uint8_t* values, const float* scales, std::int64_t rows,
                                               std::int64_t cols, std::int64_t block_rows, std::int64_t block_cols) {
  const std::int64_t scale_cols = (cols + block_cols - 1) / block_cols;
  std::vector<std::uint16_t> out(std::size_t(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* scale_row = scales + (r / block_rows) * scale_cols;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float value = helios::f8_e4m3_to_f32(values[r * cols + c]);
      out[std::size_t(r * cols + c)] = helios::f32_to_bf16(value * scale_row[c / block_cols]);
    }
  }
  return out;
}

std::vector<std::uint16_t> fp8_dequantize_bf16(const Fp8Matrix& m) {
  return fp8_dequantize_bf16(m.values.data(), m.scales.data(), m.rows, m.cols, m.block_rows, m.block_cols);
}

bool fp8_stack(const std::vector<Fp8Matrix>& parts, Fp8Matrix& out) {
  if (parts.empty()) return false;
  out = Fp8Matrix{};
  out.cols = parts.front().cols;
  for (const Fp8Matrix& p : parts) {
    if (p.cols != out.cols) return false;
    out.rows += p.rows;
  }
  const Fp8Matrix& first = parts.front();
  bool shared_blocks = true;
  for (const Fp8Matrix& p : parts) {
    shared_blocks = shared_blocks && p.block_rows == first.block_rows && p.block_cols == first.block_cols &&
                    (parts.size() == 1 || p.rows % p.block_rows == 0);
  }
  bool whole_rows = true;
  for (const Fp8Matrix& p : parts) whole_rows = whole_rows && p.block_cols >= p.cols;
  if (!shared_blocks && !whole_rows) return false;
  out.block_rows = shared_blocks ? first.block_rows : 1;
  out.block_cols = shared_blocks ? first.block_cols : out.cols;
  out.values.reserve(std::size_t(out.rows * out.cols));
  for (const Fp8Matrix& p : parts) {
    out.values.insert(out.values.end(), p.values.begin(), p.values.end());
    if (shared_blocks) {
      out.scales.insert(out.scales.end(), p.scales.begin(), p.scales.end());
    } else {
      for (std::int64_t r = 0; r < p.rows; ++r) out.scales.push_back(p.scales[std::size_t(r / p.block_rows)]);
    }
  }
  return true;
}

}  // namespace flare::model
