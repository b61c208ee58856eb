// A shared library opened at run time (dlopen) and its entry points bound by name: cuBLAS and
// cuBLASLt (core/cuda/cublas_library.h), which a CPU run never loads. Thread-safe after
// construction; each instance holds its own dlopen reference.
#pragma once

#include <string>

namespace mtnlg {

class DlLibrary {
 public:
  // Opens `soname` (the loader's search path), else `configured` (a path CMake found at
  // configure time; may be empty); throws Code::kUnsupported naming both errors, `what` and
  // `fix` when neither opens.
  DlLibrary(const std::string& soname, const std::string& configured, const std::string& what,
            const std::string& fix);
  ~DlLibrary();
  DlLibrary(const DlLibrary&) = delete;
  DlLibrary& operator=(const DlLibrary&) = delete;

  // fn = the entry point `name`; throws Code::kUnsupported naming it when the library lacks it
  // (an older library than the toolkit this was built with).
  template <typename F>
  void bind(const char* name, F& fn) const {
    // dlsym returns void*; POSIX guarantees it converts to a function pointer.
    fn = reinterpret_cast<F>(symbol(name));
  }

 private:
  void* symbol(const char* name) const;
  void* handle_ = nullptr;
  std::string what_;
};

}  // namespace mtnlg
