#include "core/cuda/cudnn_library.h"

#include <array>
#include <string>

#ifndef MTNLG_CUDNN_PATH
#define MTNLG_CUDNN_PATH ""
#endif

namespace mtnlg {

CudnnLibrary::CudnnLibrary()
    : lib_("libcudnn.so." + std::to_string(CUDNN_MAJOR), MTNLG_CUDNN_PATH, "cuDNN",
           "install cuDNN " + std::to_string(CUDNN_MAJOR) +
               " (the CUDA toolkit's, Debian's nvidia-cudnn, or PyTorch's nvidia-cudnn wheel) or "
               "add its lib folder to LD_LIBRARY_PATH; or choose other attention kernels "
               "(MTNLG_CUDA_ATTENTION=flash2 or blocked)") {
  lib_.bind("cudnnGetVersion", get_version);
  lib_.bind("cudnnCreate", create);
  lib_.bind("cudnnDestroy", destroy);
  lib_.bind("cudnnSetStream", set_stream);
  lib_.bind("cudnnGetErrorString", error_string);
  lib_.bind("cudnnGetLastErrorString", last_error_string);
  lib_.bind("cudnnBackendCreateDescriptor", create_descriptor);
  lib_.bind("cudnnBackendDestroyDescriptor", destroy_descriptor);
  lib_.bind("cudnnBackendSetAttribute", set_attribute);
  lib_.bind("cudnnBackendGetAttribute", get_attribute);
  lib_.bind("cudnnBackendFinalize", finalize);
  lib_.bind("cudnnBackendExecute", execute);
}

std::string CudnnLibrary::describe() const {
  const size_t v = get_version();
  // cuDNN 9 numbers its versions major * 10000 + minor * 100 + patch.
  return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

std::string CudnnLibrary::explain(cudnnStatus_t status) const {
  std::array<char, 1024> last{};
  last_error_string(last.data(), last.size());
  std::string out = error_string(status);
  if (last[0] != '\0') out += std::string(": ") + last.data();
  return out;
}

}  // namespace mtnlg
