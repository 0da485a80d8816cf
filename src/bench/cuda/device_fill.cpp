#include "bench/cuda/device_fill.h"

#include <algorithm>

#include "common/error.h"
#include "helios/cuda/kernel_sources.h"
#include "helios/cuda/nvrtc.h"

namespace flare::bench::cuda {

namespace hc = helios::cuda;

DeviceFill::DeviceFill(hc::CudaBackend& backend) : backend_(backend) {
  const hc::Nvrtc nvrtc;
  hc::CompileOptions options;
  options.arch = backend.device().arch();
  const std::string cubin = nvrtc.compile_cached(backend.kernel_cache(), hc::embedded_kernel("fill_random"), options);
  module_ = std::make_unique<hc::Module>("fill_random", cubin);
  bf16_ = module_->function("flare_fill_random_bf16");
  f32_ = module_->function("flare_fill_random_f32");
  f8_ = module_->function("flare_fill_random_f8e4m3");
}

DeviceFill::~DeviceFill() {
  try {
    backend_.synchronize();  // queued fills use the module
  } catch (const Error&) {
  }
}

void DeviceFill::launch(CUfunction f, std::uint64_t n, std::vector<void*> args, const char* name) {
  if (n == 0) return;
  const unsigned blocks = unsigned(std::min<std::uint64_t>((n + 255) / 256, 65535));
  hc::launch(f, {.grid_x = blocks, .block_x = 256}, backend_.stream(), std::move(args), name);
}

void DeviceFill::bf16(void* data, std::uint64_t n, std::uint64_t seed, float scale, float offset) {
  CUdeviceptr p = reinterpret_cast<CUdeviceptr>(data);
  unsigned long long n_v = n, seed_v = seed;
  launch(bf16_, n, {&p, &n_v, &seed_v, &scale, &offset}, "fill_random_bf16");
}

void DeviceFill::f32(void* data, std::uint64_t n, std::uint64_t seed, float scale, float offset) {
  CUdeviceptr p = reinterpret_cast<CUdeviceptr>(data);
  unsigned long long n_v = n, seed_v = seed;
  launch(f32_, n, {&p, &n_v, &seed_v, &scale, &offset}, "fill_random_f32");
}

void DeviceFill::f8_e4m3(void* data, std::uint64_t n, std::uint64_t seed) {
  CUdeviceptr p = reinterpret_cast<CUdeviceptr>(data);
  unsigned long long n_v = n, seed_v = seed;
  launch(f8_, n, {&p, &n_v, &seed_v}, "fill_random_f8e4m3");
}

void DeviceFill::tensor(const helios::Tensor& t, std::uint64_t seed, float scale, float offset) {
  const std::uint64_t n = std::uint64_t(t.rows) * std::uint64_t(t.stride);
  switch (t.dtype) {
    case helios::DType::bf16: return bf16(t.data, n, seed, scale, offset);
    case helios::DType::f32: return f32(t.data, n, seed, scale, offset);
    case helios::DType::f8_e4m3: return f8_e4m3(t.data, n, seed);
    default: fail(ExitCode::failure, "internal: no random fill for {}", helios::dtype_name(t.dtype));
  }
}

}  // namespace flare::bench::cuda
