#include "bench/cuda/device_rates.h"

#include <algorithm>

#include "bench/cuda/event_timer.h"

namespace flare::bench::cuda {

namespace hc = helios::cuda;

void measure_copy_bandwidth(hc::CudaBackend& backend, std::uint64_t copy_bytes, const BenchOptions& options,
                            DeviceRates& rates) {
  auto src = backend.allocate(copy_bytes), dst = backend.allocate(copy_bytes);
  // Touch both buffers first so no first-use cost lands in the timing.
  hc::check(hc::driver().memset_d8_async(reinterpret_cast<CUdeviceptr>(src->data()), 1, copy_bytes, backend.stream().handle()),
        "cuMemsetD8Async");
  hc::check(hc::driver().memset_d8_async(reinterpret_cast<CUdeviceptr>(dst->data()), 0, copy_bytes, backend.stream().handle()),
        "cuMemsetD8Async");
  rates.copy_bytes = double(copy_bytes);
  // Both rates are ceilings for every later ratio and each run is short (~0.5 and ~1.5 ms on an
  // H200), so they get more runs than the steps: clocks settle and GEMM algorithm choice happens
  // in the warm-up.
  rates.copy = time_runs(backend.stream(), std::max(options.warmup, 10), std::max(options.repetitions, 20), [&] {
    hc::check(hc::driver().memcpy_dtod_async(reinterpret_cast<CUdeviceptr>(dst->data()),
                                             reinterpret_cast<CUdeviceptr>(src->data()), copy_bytes,
                                             backend.stream().handle()),
              "cuMemcpyDtoDAsync");
  });
  rates.copy_gbs = 2.0 * double(copy_bytes) / (rates.copy.median_ms * 1e-3) / 1e9;
}

void measure_gemm_throughput(hc::CudaBackend& backend, DeviceFill& fill, std::int64_t m, std::int64_t n, std::int64_t k,
                             const BenchOptions& options, DeviceRates& rates) {
  using helios::DType;
  auto x_buf = backend.allocate(std::size_t(m * k) * 2), w_buf = backend.allocate(std::size_t(n * k) * 2),
       out_buf = backend.allocate(std::size_t(m * n) * 2);
  const helios::Tensor x = helios::Tensor::of(*x_buf, DType::bf16, m, k);
  const helios::Tensor w = helios::Tensor::of(*w_buf, DType::bf16, n, k);
  const helios::Tensor out = helios::Tensor::of(*out_buf, DType::bf16, m, n);
  fill.tensor(x, options.seed + 11, 1.0f);
  fill.tensor(w, options.seed + 12, 0.02f);
  rates.gemm_m = m;
  rates.gemm_n = n;
  rates.gemm_k = k;
  rates.gemm = time_runs(backend.stream(), std::max(options.warmup, 10), std::max(options.repetitions, 20),
                         [&] { backend.linear(x, w, nullptr, out); });
  rates.gemm_tflops = 2.0 * double(m) * double(n) * double(k) / (rates.gemm.median_ms * 1e-3) / 1e12;
}

}  // namespace flare::bench::cuda
