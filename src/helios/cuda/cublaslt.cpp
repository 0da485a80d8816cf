// cuBLASLt through dlopen (see cublaslt.h).
#include "helios/cuda/cublaslt.h"

#include <dlfcn.h>

#include <vector>

#include "common/error.h"

namespace flare::helios::cuda {
namespace {

constexpr const char* k_library_names[] = {"libcublasLt.so.13", "libcublasLt.so.12"};

// Opens the first library that loads: each name in <cuda_root>/lib64, then each on the loader path.
// Returns nullptr with *error listing every attempt.
void* open_library(const std::filesystem::path& cuda_root, std::string* path, std::string* error) {
  std::vector<std::string> candidates;
  for (const char* name : k_library_names) candidates.push_back((cuda_root / "lib64" / name).string());
  for (const char* name : k_library_names) candidates.emplace_back(name);
  std::string tried;
  for (const std::string& candidate : candidates) {
    if (void* library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *path = candidate;
      return library;
    }
    const char* why = dlerror();
    tried += fmt::format("{}{}", tried.empty() ? "" : "; ", why ? why : candidate);
  }
  *error = "cuBLASLt not found: " + tried;
  return nullptr;
}

template <typename Fn>
void resolve(void* library, const char* symbol, Fn& out, std::string& error) {
  out = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (!out && error.empty()) error = fmt::format("cuBLASLt lacks the entry point {}", symbol);
}

// Fills `api` from the library; "" or the first missing entry point.
std::string resolve_all(void* library, CublasLt::Api& api) {
  std::string error;
  resolve(library, "cublasLtCreate", api.create, error);
  resolve(library, "cublasLtDestroy", api.destroy, error);
  resolve(library, "cublasLtGetVersion", api.get_version, error);
  resolve(library, "cublasLtGetStatusName", api.get_status_name, error);
  resolve(library, "cublasLtMatmulDescCreate", api.matmul_desc_create, error);
  resolve(library, "cublasLtMatmulDescDestroy", api.matmul_desc_destroy, error);
  resolve(library, "cublasLtMatmulDescSetAttribute", api.matmul_desc_set_attribute, error);
  resolve(library, "cublasLtMatrixLayoutCreate", api.matrix_layout_create, error);
  resolve(library, "cublasLtMatrixLayoutDestroy", api.matrix_layout_destroy, error);
  resolve(library, "cublasLtMatrixLayoutSetAttribute", api.matrix_layout_set_attribute, error);
  resolve(library, "cublasLtMatmulPreferenceCreate", api.preference_create, error);
  resolve(library, "cublasLtMatmulPreferenceDestroy", api.preference_destroy, error);
  resolve(library, "cublasLtMatmulPreferenceSetAttribute", api.preference_set_attribute, error);
  resolve(library, "cublasLtMatmulAlgoGetHeuristic", api.algo_get_heuristic, error);
  resolve(library, "cublasLtMatmulAlgoCheck", api.algo_check, error);
  resolve(library, "cublasLtMatmulAlgoConfigGetAttribute", api.algo_config_get_attribute, error);
  resolve(library, "cublasLtMatmulAlgoConfigSetAttribute", api.algo_config_set_attribute, error);
  resolve(library, "cublasLtMatmulAlgoCapGetAttribute", api.algo_cap_get_attribute, error);
  resolve(library, "cublasLtMatmul", api.matmul, error);
  return error;
}

// Opens, resolves and creates the handle; "" or why not.
std::string open(const std::filesystem::path& cuda_root, CublasLt::Api& api, cublasLtHandle_t& handle,
                 std::uint64_t& version, std::string& path) {
  std::string error;
  void* library = open_library(cuda_root, &path, &error);
  if (!library) return error;
  error = resolve_all(library, api);  // the library stays open either way: unloading is never worth it
  if (!error.empty()) return fmt::format("{} ({})", error, path);
  const cublasStatus_t status = api.create(&handle);
  if (status != CUBLAS_STATUS_SUCCESS) {
    const char* name = api.get_status_name(status);
    return fmt::format("cublasLtCreate failed: {}", name ? name : "unknown status");
  }
  version = api.get_version();
  return {};
}

}  // namespace

CublasLt::CublasLt(const std::filesystem::path& cuda_root) {
  const std::string error = open(cuda_root, api_, handle_, version_, library_path_);
  if (!error.empty()) fail(ExitCode::failure, "cannot load cuBLASLt: {}", error);
}

std::unique_ptr<CublasLt> CublasLt::try_load(const std::filesystem::path& cuda_root, std::string* reason) {
  try {
    auto lt = std::make_unique<CublasLt>(cuda_root);
    if (reason) reason->clear();
    return lt;
  } catch (const Error& e) {
    if (reason) *reason = e.what();
    return nullptr;
  }
}

CublasLt::~CublasLt() {
  if (handle_) api_.destroy(handle_);
}

std::string CublasLt::status_name(cublasStatus_t status) const {
  const char* name = api_.get_status_name ? api_.get_status_name(status) : nullptr;
  return name ? std::string(name) : fmt::format("cublasStatus {}", int(status));
}

void CublasLt::check(cublasStatus_t status, std::string_view call) const {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  const ExitCode code = status == CUBLAS_STATUS_ALLOC_FAILED ? ExitCode::capacity : ExitCode::failure;
  fail(code, "cuBLASLt call {} failed: {}", call, status_name(status));
}

MatmulDesc::MatmulDesc(const CublasLt& lt, cublasComputeType_t compute, cudaDataType_t scale) : lt_(lt) {
  lt_.check(lt_.api().matmul_desc_create(&desc_, compute, scale), "cublasLtMatmulDescCreate");
}

MatmulDesc::~MatmulDesc() {
  if (desc_) lt_.api().matmul_desc_destroy(desc_);
}

MatrixLayout::MatrixLayout(const CublasLt& lt, cudaDataType_t type, std::uint64_t rows, std::uint64_t cols,
                           std::int64_t ld)
    : lt_(lt) {
  lt_.check(lt_.api().matrix_layout_create(&layout_, type, rows, cols, ld), "cublasLtMatrixLayoutCreate");
}

MatrixLayout::~MatrixLayout() {
  if (layout_) lt_.api().matrix_layout_destroy(layout_);
}

MatmulPreference::MatmulPreference(const CublasLt& lt) : lt_(lt) {
  lt_.check(lt_.api().preference_create(&pref_), "cublasLtMatmulPreferenceCreate");
}

MatmulPreference::~MatmulPreference() {
  if (pref_) lt_.api().preference_destroy(pref_);
}

}  // namespace flare::helios::cuda
