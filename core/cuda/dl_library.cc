#include "core/cuda/dl_library.h"

#include <dlfcn.h>

#include "core/status.h"

namespace mtnlg {

DlLibrary::DlLibrary(const std::string& soname, const std::string& configured,
                     const std::string& what, const std::string& fix)
    : what_(what) {
  handle_ = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ != nullptr) return;
  const std::string first_error = dlerror();
  if (!configured.empty()) handle_ = dlopen(configured.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ != nullptr) return;
  const char* second = configured.empty() ? nullptr : dlerror();
  throw unsupported("cannot open " + what + " (" + first_error +
                        (second ? std::string("; ") + second : std::string()) + "): " + fix,
                    what);
}

DlLibrary::~DlLibrary() {
  if (handle_) dlclose(handle_);
}

void* DlLibrary::symbol(const char* name) const {
  void* p = dlsym(handle_, name);
  if (p == nullptr)
    throw unsupported(what_ + " has no " + name +
                          ": the library found is older than this build's CUDA toolkit; put the "
                          "toolkit's lib64 first in LD_LIBRARY_PATH",
                      what_);
  return p;
}

}  // namespace mtnlg
