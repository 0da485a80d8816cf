// cuBLASLt, opened at run time with dlopen like the driver and NVRTC, so the programs start where the
// library is missing (the CUDA backend then keeps its NVRTC GEMM). cublasLt.h provides the types
// only. The library is looked up as libcublasLt.so.13, then .so.12, first in <cuda_root>/lib64, then
// on the loader path. Only the entry points Flare calls are resolved.
//
// Ownership: a CublasLt owns the library's handle; it is immutable after construction and used by
// the backend's engine thread. Descriptor owners (MatmulDesc, MatrixLayout, MatmulPreference) are
// RAII wrappers of one cuBLASLt descriptor each.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace flare::helios::cuda {

class CublasLt {
 public:
  struct Api {
    decltype(&::cublasLtCreate) create = nullptr;
    decltype(&::cublasLtDestroy) destroy = nullptr;
    decltype(&::cublasLtGetVersion) get_version = nullptr;
    decltype(&::cublasLtGetStatusName) get_status_name = nullptr;
    decltype(&::cublasLtMatmulDescCreate) matmul_desc_create = nullptr;
    decltype(&::cublasLtMatmulDescDestroy) matmul_desc_destroy = nullptr;
    decltype(&::cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute = nullptr;
    decltype(&::cublasLtMatrixLayoutCreate) matrix_layout_create = nullptr;
    decltype(&::cublasLtMatrixLayoutDestroy) matrix_layout_destroy = nullptr;
    decltype(&::cublasLtMatrixLayoutSetAttribute) matrix_layout_set_attribute = nullptr;
    decltype(&::cublasLtMatmulPreferenceCreate) preference_create = nullptr;
    decltype(&::cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
    decltype(&::cublasLtMatmulPreferenceSetAttribute) preference_set_attribute = nullptr;
    decltype(&::cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic = nullptr;
    decltype(&::cublasLtMatmulAlgoCheck) algo_check = nullptr;
    decltype(&::cublasLtMatmulAlgoConfigGetAttribute) algo_config_get_attribute = nullptr;
    decltype(&::cublasLtMatmulAlgoConfigSetAttribute) algo_config_set_attribute = nullptr;
    decltype(&::cublasLtMatmulAlgoCapGetAttribute) algo_cap_get_attribute = nullptr;
    decltype(&::cublasLtMatmul) matmul = nullptr;
  };

  // Throws flare::Error naming every place tried when the library cannot be opened or initialized.
  explicit CublasLt(const std::filesystem::path& cuda_root);
  // As the constructor, but nullptr with *reason set instead of throwing.
  static std::unique_ptr<CublasLt> try_load(const std::filesystem::path& cuda_root, std::string* reason);
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;

  const Api& api() const { return api_; }
  cublasLtHandle_t handle() const { return handle_; }
  std::uint64_t version() const { return version_; }  // cublasLtGetVersion(), e.g. 130100
  const std::string& library_path() const { return library_path_; }

  // Throws flare::Error "cuBLASLt call <call> failed: <STATUS>" unless status is success.
  void check(cublasStatus_t status, std::string_view call) const;
  std::string status_name(cublasStatus_t status) const;

 private:
  Api api_;
  cublasLtHandle_t handle_ = nullptr;
  std::uint64_t version_ = 0;
  std::string library_path_;
};

class MatmulDesc {
 public:
  MatmulDesc(const CublasLt& lt, cublasComputeType_t compute, cudaDataType_t scale);
  ~MatmulDesc();
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
  template <typename T>
  void set(cublasLtMatmulDescAttributes_t attribute, const T& value) {
    lt_.check(lt_.api().matmul_desc_set_attribute(desc_, attribute, &value, sizeof value), "cublasLtMatmulDescSetAttribute");
  }
  cublasLtMatmulDesc_t get() const { return desc_; }

 private:
  const CublasLt& lt_;
  cublasLtMatmulDesc_t desc_ = nullptr;
};

// A column-major rows x cols matrix with leading dimension ld (elements).
class MatrixLayout {
 public:
  MatrixLayout(const CublasLt& lt, cudaDataType_t type, std::uint64_t rows, std::uint64_t cols, std::int64_t ld);
  ~MatrixLayout();
  MatrixLayout(const MatrixLayout&) = delete;
  MatrixLayout& operator=(const MatrixLayout&) = delete;
  template <typename T>
  void set(cublasLtMatrixLayoutAttribute_t attribute, const T& value) {
    lt_.check(lt_.api().matrix_layout_set_attribute(layout_, attribute, &value, sizeof value),
              "cublasLtMatrixLayoutSetAttribute");
  }
  // Makes it `count` matrices, each `offset` elements after the one before (a strided batch).
  void set_batch(std::int32_t count, std::int64_t offset) {
    set(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count);
    set(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, offset);
  }
  cublasLtMatrixLayout_t get() const { return layout_; }

 private:
  const CublasLt& lt_;
  cublasLtMatrixLayout_t layout_ = nullptr;
};

class MatmulPreference {
 public:
  explicit MatmulPreference(const CublasLt& lt);
  ~MatmulPreference();
  MatmulPreference(const MatmulPreference&) = delete;
  MatmulPreference& operator=(const MatmulPreference&) = delete;
  template <typename T>
  void set(cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
    lt_.check(lt_.api().preference_set_attribute(pref_, attribute, &value, sizeof value),
              "cublasLtMatmulPreferenceSetAttribute");
  }
  cublasLtMatmulPreference_t get() const { return pref_; }

 private:
  const CublasLt& lt_;
  cublasLtMatmulPreference_t pref_ = nullptr;
};

}  // namespace flare::helios::cuda
