#include "core/cuda/cuda_check.h"

#include <string>

namespace mtnlg {

namespace {
std::string where(const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line);
}
}  // namespace

void throw_cuda_error(cudaError_t err, const char* expr, const char* file, int line) {
  // Clear the sticky "last error" for non-sticky errors so the next check does not re-report it.
  (void)cudaGetLastError();
  const std::string what =
      std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) + ") in " + expr;
  switch (err) {
    case cudaErrorMemoryAllocation:
      throw Error(Code::kInvalidArgument,
                  "out of GPU memory: " + what +
                      "; lower parallel.micro_batch_size, turn on "
                      "parallel.activation_checkpointing, or use more tensor/pipeline ranks "
                      "(--dry-run prints the plan)",
                  where(file, line));
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
      throw unsupported("cannot use the GPU: " + what +
                            "; check the driver and CUDA_VISIBLE_DEVICES, rebuild for this GPU's "
                            "architecture (CMAKE_CUDA_ARCHITECTURES), or train on the CPU backend",
                        where(file, line));
    default:
      throw Error(Code::kInternal, "CUDA error " + what, where(file, line));
  }
}

namespace {

// cuBLAS's own name for a status (cublasGetStatusName would need the library linked).
std::string cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "cuBLAS status " + std::to_string(static_cast<int>(status));
}

}  // namespace

void throw_cublas_error(cublasStatus_t status, const char* expr, const char* file, int line) {
  const std::string what = cublas_status_name(status) + " in " + expr;
  if (status == CUBLAS_STATUS_ALLOC_FAILED) {
    throw Error(Code::kInvalidArgument,
                "out of GPU memory in cuBLAS: " + what + "; lower training.micro_batch_size",
                where(file, line));
  }
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_ARCH_MISMATCH) {
    throw unsupported("cuBLAS does not support this on this GPU: " + what, where(file, line));
  }
  throw Error(Code::kInternal, "cuBLAS error " + what, where(file, line));
}

}  // namespace mtnlg
