// Building blocks the architectures' forward programs share (llama.cpp's build_* helpers): small
// compositions of backend operations that do not belong to any one architecture.
#pragma once

#include "helios/backend.h"
#include "model/weight_table.h"

namespace flare::model {

// out = x @ weight^T (+ bias): Backend::linear, or linear_fp8 for a weight kept as FP8.
inline void project(helios::Backend& backend, const helios::Tensor& x, const Weight& weight, const helios::Tensor* bias,
                    helios::Tensor out) {
  if (weight.quant.format == helios::QuantizedWeight::Format::fp8_e4m3) {
    backend.linear_fp8(x, weight.values, weight.quant, bias, out);
  } else {
    backend.linear(x, weight.values, bias, out);
  }
}

}  // namespace flare::model
