// An FP8 E4M3 weight matrix with block scales, as a checkpoint stores it and a package keeps it:
// element (r, c) stands for e4m3(r, c) * scales[r / block_rows][c / block_cols]. A per-tensor scale
// is one block of the whole matrix, per-channel scales one block per row.
#pragma once

#include <cstdint>
#include <vector>

namespace flare::model {

struct Fp8Matrix {
  std::int64_t rows = 0, cols = 0;
  std::int64_t block_rows = 0, block_cols = 0;
  std::vector<std::uint8_t> values;  // [rows, cols] e4m3
  std::vector<float> scales;         // [scale_rows(), scale_cols()]

  std::int64_t scale_rows() const { return (rows + block_rows - 1) / block_rows; }
  std::int64_t scale_cols() const { return (cols + block_cols - 1) / block_cols; }
};

// The matrix in BF16: each element's e4m3 value times its scale, rounded once (the values a BF16
// package of the same checkpoint holds).
std::vector<std::uint16_t> fp8_dequantize_bf16(const Fp8Matrix& m);

// The same for a matrix given by its parts (values [rows, cols] e4m3, scales [ceil(rows /
// block_rows), ceil(cols / block_cols)]), as a package stores them.
std::vector<std::uint16_t> fp8_dequantize_bf16(const std::uint8_t* values, const float* scales, std::int64_t rows,
                                               std::int64_t cols, std::int64_t block_rows, std::int64_t block_cols);

// The parts stacked row-wise into one matrix (q, k and v; gate and up), when the stack has block
// scales: parts sharing one block layout whose row counts are multiples of its block rows keep
// it; parts whose blocks span whole rows (tensor and channel scales) become one block per row.
// False when neither holds (blocks that would straddle two parts).
bool fp8_stack(const std::vector<Fp8Matrix>& parts, Fp8Matrix& out);

}  // namespace flare::model
