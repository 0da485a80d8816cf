// NVRTC, opened at run time with dlopen: compiles a named CUDA C++ kernel source for one exact
// architecture ("sm_90") and the model's shapes (passed as -D defines) to a CUBIN. The library is
// looked up in the toolkit's lib64 folder ([paths] cuda, default /usr/local/cuda), then on the
// default loader path. compile_cached() goes through the on-disk kernel cache (kernel_cache.h).
//
// Ownership: an Nvrtc is immutable after construction and may be shared by threads (NVRTC programs
// are per call).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "helios/cuda/kernel_sources.h"
#include "helios/kernel_cache.h"

namespace flare::helios::cuda {

struct CompileOptions {
  std::string arch;                                         // "sm_80", "sm_90", "sm_120", ...
  std::vector<std::pair<std::string, std::string>> defines;  // -DNAME=VALUE (shapes)
  bool fast_math = false;                                   // --use_fast_math
};

inline constexpr std::string_view k_default_cuda_root = "/usr/local/cuda";

class Nvrtc {
 public:
  // Opens libnvrtc.so.13 from cuda_root/lib64, else from the loader path; throws flare::Error
  // (naming both places) when neither works.
  explicit Nvrtc(const std::filesystem::path& cuda_root = std::filesystem::path(k_default_cuda_root));
  // As the constructor, but returns nullptr with *reason set instead of throwing.
  static std::unique_ptr<Nvrtc> try_load(const std::filesystem::path& cuda_root, std::string* reason);

  std::string version() const;  // "13.0"
  const std::string& library_path() const { return library_path_; }

  // The full NVRTC option list for `options` (architecture, C++17, -default-device, the toolkit's
  // include folder, defines). Throws a usage error for a malformed arch or define name.
  std::vector<std::string> option_list(const CompileOptions& options) const;

  // Compiles to a CUBIN; a compile error is flare::Error (preparation) naming the kernel, the
  // architecture and NVRTC's log.
  std::string compile(const KernelSource& kernel, const CompileOptions& options) const;

  // compile() through `cache`: key = SHA-256 of (source, arch, option list, NVRTC version).
  std::string compile_cached(KernelCache& cache, const KernelSource& kernel, const CompileOptions& options) const;

  struct Api;  // the resolved entry points (nvrtc.cpp)

 private:
  explicit Nvrtc(std::nullptr_t) {}  // unloaded, for try_load
  static std::string open(Nvrtc& self, const std::filesystem::path& cuda_root);  // "" or the reason

  std::shared_ptr<const Api> api_;
  std::string library_path_;
  std::filesystem::path include_dir_;  // cuda_root/include ("" when it does not exist)
  int major_ = 0, minor_ = 0;
};

}  // namespace flare::helios::cuda
