#include "core/cuda/cublas_library.h"

#include <string>

#ifndef MTNLG_CUBLAS_PATH
#define MTNLG_CUBLAS_PATH ""
#endif
#ifndef MTNLG_CUBLASLT_PATH
#define MTNLG_CUBLASLT_PATH ""
#endif

namespace mtnlg {

namespace {

std::string fix(const char* name) {
  return std::string("install the CUDA toolkit's ") + name + " " +
         std::to_string(CUBLAS_VER_MAJOR) +
         " or add its lib64 to LD_LIBRARY_PATH; or train on the CPU (device: cpu)";
}

}  // namespace

CublasLibrary::CublasLibrary()
    : lib_("libcublas.so." + std::to_string(CUBLAS_VER_MAJOR), MTNLG_CUBLAS_PATH, "cuBLAS",
           fix("cuBLAS")) {
  lib_.bind("cublasCreate_v2", create);
  lib_.bind("cublasDestroy_v2", destroy);
  lib_.bind("cublasSetStream_v2", set_stream);
  lib_.bind("cublasGetStream_v2", get_stream);
  lib_.bind("cublasSetWorkspace_v2", set_workspace);
  lib_.bind("cublasGemmEx", gemm_ex);
  lib_.bind("cublasGemmStridedBatchedEx", gemm_strided_batched_ex);
}

CublasLtLibrary::CublasLtLibrary()
    : lib_("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR), MTNLG_CUBLASLT_PATH, "cuBLASLt",
           fix("cuBLASLt")) {
  lib_.bind("cublasLtCreate", create);
  lib_.bind("cublasLtDestroy", destroy);
  lib_.bind("cublasLtMatmulDescCreate", desc_create);
  lib_.bind("cublasLtMatmulDescDestroy", desc_destroy);
  lib_.bind("cublasLtMatmulDescSetAttribute", desc_set);
  lib_.bind("cublasLtMatrixLayoutCreate", layout_create);
  lib_.bind("cublasLtMatrixLayoutDestroy", layout_destroy);
  lib_.bind("cublasLtMatmulPreferenceCreate", pref_create);
  lib_.bind("cublasLtMatmulPreferenceDestroy", pref_destroy);
  lib_.bind("cublasLtMatmulPreferenceSetAttribute", pref_set);
  lib_.bind("cublasLtMatmulAlgoGetHeuristic", heuristic);
  lib_.bind("cublasLtMatmul", matmul);
}

}  // namespace mtnlg
