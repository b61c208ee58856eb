// cuBLAS and cuBLASLt, opened at run time (dlopen) instead of linked. libcublas and libcublasLt
// are about 600 MB; linked into mtnlg-train they cost every start about 0.1 s of page faults
// whether or not a GPU is used (thousands of starts in the tests, every CPU run). A CudaBackend
// opens them when it is built; nothing else pays for it.
//
// Each holds the entry points the backend calls. Thread-safe after construction (read-only);
// each instance holds its own dlopen reference.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include "core/cuda/dl_library.h"

namespace mtnlg {

class CublasLibrary {
 public:
  // Opens libcublas.so.<major> (the loader's search path), else the library CMake found at
  // configure time; throws Code::kUnsupported naming both and the fix when neither opens.
  CublasLibrary();

  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*get_stream)(cublasHandle_t, cudaStream_t*) = nullptr;
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                            int, int, int, const void*, const void*, cudaDataType,
                                            int, long long, const void*, cudaDataType, int,
                                            long long, const void*, void*, cudaDataType, int,
                                            long long, int, cublasComputeType_t,
                                            cublasGemmAlgo_t) = nullptr;

 private:
  DlLibrary lib_;
};

// cuBLASLt: the GEMMs with fused epilogues (core/cuda/gemm_epilogue.h).
class CublasLtLibrary {
 public:
  // As CublasLibrary, for libcublasLt.so.<major>.
  CublasLtLibrary();

  cublasStatus_t (*create)(cublasLtHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasLtHandle_t) = nullptr;
  cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t*, cublasComputeType_t,
                                cudaDataType_t) = nullptr;
  cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t) = nullptr;
  cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void*,
                             size_t) = nullptr;
  cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t*, cudaDataType, uint64_t, uint64_t,
                                  int64_t) = nullptr;
  cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t) = nullptr;
  cublasStatus_t (*pref_create)(cublasLtMatmulPreference_t*) = nullptr;
  cublasStatus_t (*pref_destroy)(cublasLtMatmulPreference_t) = nullptr;
  cublasStatus_t (*pref_set)(cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t,
                             const void*, size_t) = nullptr;
  cublasStatus_t (*heuristic)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                              cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                              cublasLtMatmulHeuristicResult_t*, int*) = nullptr;
  cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*,
                           cublasLtMatrixLayout_t, const void*, cublasLtMatrixLayout_t, const void*,
                           const void*, cublasLtMatrixLayout_t, void*, cublasLtMatrixLayout_t,
                           const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t) = nullptr;

 private:
  DlLibrary lib_;
};

// A cuBLAS handle and the library it came from: what the GEMM launchers take.
struct Blas {
  const CublasLibrary* lib = nullptr;
  cublasHandle_t handle = nullptr;
};

}  // namespace mtnlg
