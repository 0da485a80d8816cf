// The CUDA driver API, opened at run time with dlopen("libcuda.so.1") so that the programs start on
// machines without an NVIDIA driver. cuda.h provides the types only; nothing links libcuda or cudart.
// Every failing call throws flare::Error naming the call and the driver's error name and text.
//
// Ownership: Driver is loaded once per process and immutable afterwards (function pointers only).
// A Context owns the retained primary context of one device; DeviceMemory, Stream and Module are
// RAII owners created under a current context. Thread ownership follows the backend: one engine
// thread per device uses these objects (Context::make_current binds the context to the caller).
#pragma once

#include <cuda.h>
#include <cudaProfiler.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "helios/cuda/cuda_backend_options.h"

namespace flare::helios::cuda {

// The entry points Flare uses; each member is named as the API call it holds.
struct Driver {
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDriverGetVersion) driver_get_version = nullptr;
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetName) device_get_name = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuDeviceTotalMem) device_total_mem = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primary_ctx_release = nullptr;
  decltype(&::cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&::cuMemGetInfo) mem_get_info = nullptr;
  decltype(&::cuMemAlloc) mem_alloc = nullptr;
  decltype(&::cuMemFree) mem_free = nullptr;
  decltype(&::cuMemcpyHtoDAsync) memcpy_htod_async = nullptr;
  decltype(&::cuMemcpyDtoHAsync) memcpy_dtoh_async = nullptr;
  decltype(&::cuMemcpyDtoDAsync) memcpy_dtod_async = nullptr;
  decltype(&::cuMemsetD8Async) memset_d8_async = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamDestroy) stream_destroy = nullptr;
  decltype(&::cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&::cuModuleLoadData) module_load_data = nullptr;
  decltype(&::cuModuleUnload) module_unload = nullptr;
  decltype(&::cuModuleGetFunction) module_get_function = nullptr;
  decltype(&::cuLaunchKernel) launch_kernel = nullptr;
  decltype(&::cuFuncSetAttribute) func_set_attribute = nullptr;  // dynamic shared memory above 48 KiB
  decltype(&::cuLaunchKernelEx) launch_kernel_ex = nullptr;      // programmatic dependent launch
  decltype(&::cuOccupancyMaxActiveBlocksPerMultiprocessor) occupancy_max_active_blocks = nullptr;  // persistent grids
  decltype(&::cuEventCreate) event_create = nullptr;
  decltype(&::cuEventDestroy) event_destroy = nullptr;
  decltype(&::cuEventRecord) event_record = nullptr;
  decltype(&::cuEventSynchronize) event_synchronize = nullptr;
  decltype(&::cuEventElapsedTime) event_elapsed_time = nullptr;
  decltype(&::cuStreamIsCapturing) stream_is_capturing = nullptr;  // GEMM tuning never times inside a capture
  // The range an external profiler (ncu --profile-from-start off) records; null where the driver
  // lacks them.
  decltype(&::cuProfilerStart) profiler_start = nullptr;
  decltype(&::cuProfilerStop) profiler_stop = nullptr;
  // CUDA graphs of captured steps and the pinned staging of their inputs (graph.h).
  decltype(&::cuStreamBeginCapture) stream_begin_capture = nullptr;
  decltype(&::cuStreamEndCapture) stream_end_capture = nullptr;
  decltype(&::cuGraphInstantiate) graph_instantiate = nullptr;
  decltype(&::cuGraphLaunch) graph_launch = nullptr;
  decltype(&::cuGraphGetNodes) graph_get_nodes = nullptr;
  decltype(&::cuGraphExecDestroy) graph_exec_destroy = nullptr;
  decltype(&::cuGraphDestroy) graph_destroy = nullptr;
  decltype(&::cuMemHostAlloc) mem_host_alloc = nullptr;
  decltype(&::cuMemFreeHost) mem_free_host = nullptr;
  // Virtual memory management: the KV cache's reservation, backed on demand (vmm_reservation.h).
  decltype(&::cuMemAddressReserve) mem_address_reserve = nullptr;
  decltype(&::cuMemAddressFree) mem_address_free = nullptr;
  decltype(&::cuMemCreate) mem_create = nullptr;
  decltype(&::cuMemRelease) mem_release = nullptr;
  decltype(&::cuMemMap) mem_map = nullptr;
  decltype(&::cuMemUnmap) mem_unmap = nullptr;
  decltype(&::cuMemSetAccess) mem_set_access = nullptr;
  decltype(&::cuMemGetAllocationGranularity) mem_get_allocation_granularity = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuGetErrorString) get_error_string = nullptr;
  // Optional (null where the driver predates it, CUDA 12.0): TMA descriptors of the stream GEMM.
  decltype(&::cuTensorMapEncodeTiled) tensor_map_encode_tiled = nullptr;

  int version = 0;  // cuDriverGetVersion, e.g. 13000
};

// The process's driver, loaded and cuInit'ed on first use; throws flare::Error when libcuda.so.1
// cannot be opened, lacks an entry point, or cuInit fails (the message says which).
const Driver& driver();

// Whether driver() would succeed; on failure, *reason says why ("libcuda.so.1: cannot open ...").
bool driver_available(std::string* reason = nullptr);

// Throws flare::Error "CUDA call <call> failed: <NAME> (<text>)" unless result is CUDA_SUCCESS.
void check(CUresult result, std::string_view call);

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a result code.
std::string error_text(CUresult result);

struct DeviceInfo {
  int index = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int n_multiprocessors = 0;
  int max_shared_bytes_per_block = 0;  // dynamic shared memory a kernel may opt into
  std::size_t l2_bytes = 0;
  std::size_t total_bytes = 0;
  std::string arch() const;  // "sm_90"
};

int device_count();  // 0 when the driver is missing or sees no device
DeviceInfo device_info(int index);

// The retained primary context of one device (released on destruction).
class Context {
 public:
  explicit Context(int device_index);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  void make_current() const;  // binds the context to the calling thread
  const DeviceInfo& device() const { return info_; }
  CUdevice device_handle() const { return device_; }
  CUcontext handle() const { return ctx_; }

 private:
  DeviceInfo info_;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
};

class Stream {
 public:
  Stream();  // a non-blocking stream in the current context
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream handle() const { return stream_; }
  void synchronize() const;
  // Whether the stream is being captured into a graph (nothing may allocate or wait then).
  bool capturing() const;

 private:
  CUstream stream_ = nullptr;
};

// cuMemAlloc'ed device memory; size 0 allocates nothing.
class DeviceMemory {
 public:
  explicit DeviceMemory(std::size_t size_bytes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  CUdeviceptr address() const { return ptr_; }
  void* data() const { return reinterpret_cast<void*>(ptr_); }
  std::size_t size_bytes() const { return size_; }

 private:
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
};

// Asynchronous copies on `stream`; host memory must stay valid until the stream is synchronized.
void copy_to_device(CUdeviceptr dst, const void* src, std::size_t size_bytes, const Stream& stream);
void copy_to_host(void* dst, CUdeviceptr src, std::size_t size_bytes, const Stream& stream);

// A loaded CUBIN (cuModuleLoadData); `name` names it in errors.
class Module {
 public:
  Module(std::string name, const std::string& cubin);
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  CUfunction function(const char* entry) const;  // throws naming the module and the entry point
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  CUmodule module_ = nullptr;
};

struct LaunchShape {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned shared_bytes = 0;
  unsigned cluster_x = 1, cluster_y = 1;  // thread block clusters (sm_90+) where either is > 1
  // Programmatic dependent launch: the kernel may start while the previous one on the stream
  // finishes, and waits for it with griddepcontrol.wait (every Flare kernel does, first thing).
  bool overlap_previous = false;
};

// Whether kernels on this device launch with overlap_previous: sm_90 and later under
// DependentLaunch::all. Not by default (early_work): on an H200 the Llama-3.1-8B batch-1 decode
// graph ran 2.5% slower with every kernel overlapping (docs/PERF.md).
bool programmatic_launch(const DeviceInfo& device, DependentLaunch mode);
// Whether the kernels with work to do before they wait (the skinny, streaming and FP8 GEMMs, the
// decode attention) launch with overlap_previous: sm_90 and later unless `mode` is off. The GEMMs'
// first weight loads go out before they wait for the previous kernel, so the weight stream's ramp
// hides under that kernel's tail (H200, Llama-3.1-8B batch-1 graph: 4.22 -> 4.14 ms); the decode
// attention reads its rows' lengths and first block-table entries there.
bool early_work_programmatic_launch(const DeviceInfo& device, DependentLaunch mode);

// cuLaunchKernel (cuLaunchKernelEx with overlap_previous) with `args` pointing at each argument's
// value, in the kernel's parameter order. Returns the driver's answer.
CUresult try_launch(CUfunction function, const LaunchShape& shape, CUstream stream, void** args);
// The same; a failure throws flare::Error naming the kernel.
void launch(CUfunction function, const LaunchShape& shape, const Stream& stream, std::vector<void*> args,
            std::string_view kernel_name);

}  // namespace flare::helios::cuda
