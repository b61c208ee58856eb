// cuBLAS, opened at run time (dlopen) instead of linked. libcublas and libcublasLt are about
// 600 MB; linked into mtnlg-train they cost every start about 0.1 s of page faults whether or not
// a GPU is used (thousands of starts in the tests, every CPU run). A CudaBackend opens the
// library when it is built; nothing else pays for it.
//
// CublasLibrary holds the entry points the backend calls. Thread-safe after construction
// (read-only); each instance holds its own dlopen reference.
#pragma once

#include <cublas_v2.h>

namespace mtnlg {

class CublasLibrary {
 public:
  // Opens libcublas.so.<major> (the loader's search path), else the library CMake found at
  // configure time; throws Code::kUnsupported naming both and the fix when neither opens.
  CublasLibrary();
  ~CublasLibrary();
  CublasLibrary(const CublasLibrary&) = delete;
  CublasLibrary& operator=(const CublasLibrary&) = delete;

  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*get_stream)(cublasHandle_t, cudaStream_t*) = nullptr;
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
  void* handle_ = nullptr;
};

// A cuBLAS handle and the library it came from: what the GEMM launchers take.
struct Blas {
  const CublasLibrary* lib = nullptr;
  cublasHandle_t handle = nullptr;
};

}  // namespace mtnlg
