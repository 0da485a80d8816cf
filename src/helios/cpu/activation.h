// The gated activations of the CPU backend's MLPs (swiglu, geglu, the experts of moe_experts), in F32.
#pragma once

#include <cmath>

namespace flare::helios::cpu {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// PyTorch's gelu(approximate="tanh") in F32: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline float gelu_tanh(float x) {
  constexpr float k_sqrt_2_over_pi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(k_sqrt_2_over_pi * (x + 0.044715f * x * x * x)));
}

}  // namespace flare::helios::cpu
