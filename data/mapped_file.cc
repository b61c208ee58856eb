#include "data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/status.h"

namespace mtnlg {

namespace {

// Closes a file descriptor on scope exit; the mapping outlives it.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(const std::string& path, const std::string& what_fix) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) {
      throw not_found("no such file" + (what_fix.empty() ? "" : ": " + what_fix), path);
    }
    throw io_error(std::string("cannot open: ") + std::strerror(err), path);
  }
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw io_error(std::string("cannot stat: ") + std::strerror(errno), path);
  }
  if (!S_ISREG(st.st_mode)) throw io_error("not a regular file", path);
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) return;  // mmap rejects a zero length
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    throw io_error(std::string("cannot mmap: ") + std::strerror(errno), path);
  }
  data_ = static_cast<const uint8_t*>(p);
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
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace mtnlg
