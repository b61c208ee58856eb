// cuDNN 9, opened at run time (dlopen) as cuBLAS is (core/cuda/cublas_library.h says why): only
// its graph API's entry points, which the fused attention (core/cuda/cudnn_attention.h) builds
// its graphs with. A CPU run or a run with other attention kernels never loads it.
#pragma once

#include <cudnn_graph.h>

#include <string>

#include "core/cuda/dl_library.h"

namespace mtnlg {

class CudnnLibrary {
 public:
  // Opens libcudnn.so.<major> (the loader's search path), else the library CMake found; throws
  // Code::kUnsupported naming both and the fix when neither opens.
  CudnnLibrary();

  size_t (*get_version)() = nullptr;
  cudnnStatus_t (*create)(cudnnHandle_t*) = nullptr;
  cudnnStatus_t (*destroy)(cudnnHandle_t) = nullptr;
  cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t) = nullptr;
  const char* (*error_string)(cudnnStatus_t) = nullptr;
  void (*last_error_string)(char*, size_t) = nullptr;
  cudnnStatus_t (*create_descriptor)(cudnnBackendDescriptorType_t,
                                     cudnnBackendDescriptor_t*) = nullptr;
  cudnnStatus_t (*destroy_descriptor)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*set_attribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                 cudnnBackendAttributeType_t, int64_t, const void*) = nullptr;
  cudnnStatus_t (*get_attribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                 cudnnBackendAttributeType_t, int64_t, int64_t*, void*) = nullptr;
  cudnnStatus_t (*finalize)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*execute)(cudnnHandle_t, cudnnBackendDescriptor_t,
                           cudnnBackendDescriptor_t) = nullptr;

  // "cuDNN 9.19.0 (libcudnn.so.9)": what the log names.
  std::string describe() const;
  // cuDNN's own words for a failed call: its status name and the last error message it recorded.
  std::string explain(cudnnStatus_t status) const;

 private:
  DlLibrary lib_;
};

}  // namespace mtnlg
