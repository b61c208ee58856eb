// CUDA_CHECK and CUBLAS_CHECK: the one boundary where CUDA runtime and cuBLAS status codes
// become mtnlg::Error.
//
// Every runtime and cuBLAS call in core/cuda/ goes through one of these macros, so a failure
// names the call, file:line and CUDA's own error string, and nothing above core/cuda/ ever sees
// a cudaError_t. Kernel launches are followed by CUDA_CHECK(cudaGetLastError()).
// Stateless and thread-safe.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/status.h"

namespace mtnlg {

// Throw an Error for a failed call `expr` at file:line. Out-of-memory and missing-device errors
// get their own codes and a fix in the message; everything else is Code::kInternal.
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file,
                                     int line);

}  // namespace mtnlg

#define CUDA_CHECK(expr)                                                \
  do {                                                                  \
    const cudaError_t mtnlg_err_ = (expr);                              \
    if (mtnlg_err_ != cudaSuccess)                                      \
      ::mtnlg::throw_cuda_error(mtnlg_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(expr)                                               \
  do {                                                                   \
    const cublasStatus_t mtnlg_st_ = (expr);                             \
    if (mtnlg_st_ != CUBLAS_STATUS_SUCCESS)                              \
      ::mtnlg::throw_cublas_error(mtnlg_st_, #expr, __FILE__, __LINE__); \
  } while (0)
