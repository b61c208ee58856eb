#include "data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/input_file.h"
#include "core/mapped_inputs.h"
#include "core/status.h"

namespace mtnlg {

MappedFile::MappedFile(const std::string& path, const std::string& what_fix) : path_(path) {
  const InputFile file(path, what_fix);  // a regular file, checked before it could block
  size_ = static_cast<size_t>(file.size());
  if (size_ == 0) return;  // mmap rejects a zero length
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, file.fd(), 0);
  if (p == MAP_FAILED) {
    throw io_error(std::string("cannot mmap: ") + std::strerror(errno), path);
  }
  data_ = static_cast<const uint8_t*>(p);
  register_mapped_input(data_, size_, path_);  // a SIGBUS here names the file
}

MappedFile::~MappedFile() {
  unmap();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::unmap() {
  unregister_mapped_input(data_);
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace mtnlg
