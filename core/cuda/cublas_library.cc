#include "core/cuda/cublas_library.h"

#include <dlfcn.h>

#include <string>

#include "core/status.h"

#ifndef MTNLG_CUBLAS_PATH
#define MTNLG_CUBLAS_PATH ""
#endif

namespace mtnlg {

namespace {

template <typename F>
void bind(void* lib, const char* name, F& fn) {
  // dlsym returns void*; POSIX guarantees it converts to a function pointer.
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr)
    throw unsupported(std::string("cuBLAS has no ") + name +
                          ": the library found is older than this build's CUDA toolkit; put the "
                          "toolkit's lib64 first in LD_LIBRARY_PATH",
                      "cublas");
}

}  // namespace

CublasLibrary::CublasLibrary() {
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  handle_ = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string first_error = handle_ ? "" : dlerror();
  const std::string configured = MTNLG_CUBLAS_PATH;
  if (handle_ == nullptr && !configured.empty())
    handle_ = dlopen(configured.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* second = configured.empty() ? nullptr : dlerror();
    throw unsupported("cannot open cuBLAS (" + first_error +
                          (second ? std::string("; ") + second : std::string()) +
                          "): install the CUDA toolkit's cuBLAS " +
                          std::to_string(CUBLAS_VER_MAJOR) +
                          " or add its lib64 to LD_LIBRARY_PATH; or train on the CPU (device: cpu)",
                      "cublas");
  }
  try {
    bind(handle_, "cublasCreate_v2", create);
    bind(handle_, "cublasDestroy_v2", destroy);
    bind(handle_, "cublasSetStream_v2", set_stream);
    bind(handle_, "cublasGetStream_v2", get_stream);
    bind(handle_, "cublasGemmEx", gemm_ex);
    bind(handle_, "cublasGemmStridedBatchedEx", gemm_strided_batched_ex);
  } catch (...) {
    dlclose(handle_);  // the destructor does not run for a constructor that throws
    throw;
  }
}

CublasLibrary::~CublasLibrary() {
  if (handle_) dlclose(handle_);
}

}  // namespace mtnlg
