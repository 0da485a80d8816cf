// Shared by the NVRTC compile tests: the process's NVRTC (loaded once), and a skip when this
// machine has none. They need NVRTC, no GPU.
#pragma once

#ifdef FLARE_HAVE_CUDA

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "helios/cuda/nvrtc.h"

namespace flare::helios::cuda {

// NVRTC from the default CUDA root, or nullptr with *reason set.
inline const Nvrtc* nvrtc_or_null(std::string* reason) {
  static std::string why;
  static const std::unique_ptr<Nvrtc> nvrtc = Nvrtc::try_load(k_default_cuda_root, &why);
  *reason = why;
  return nvrtc.get();
}

}  // namespace flare::helios::cuda

// Declares `var` as the process's NVRTC, or skips the test.
#define FLARE_NEED_NVRTC(var)                                                                    \
  std::string nvrtc_reason;                                                                      \
  const ::flare::helios::cuda::Nvrtc* var = ::flare::helios::cuda::nvrtc_or_null(&nvrtc_reason); \
  if (!var) GTEST_SKIP() << "NVRTC unavailable: " << nvrtc_reason

#endif  // FLARE_HAVE_CUDA
