#include "data/curate/spill_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/status.h"

namespace mtnlg::curate {

namespace {
constexpr size_t kBufferBytes = 1 << 20;
}

SpillFile::SpillFile(const std::string& dir) : dir_(dir) {
  std::string path = dir + "/spill-XXXXXX";
  fd_ = ::mkstemp(path.data());
  if (fd_ < 0)
    throw io_error(std::string("cannot make a scratch file: ") + std::strerror(errno) +
                       "; the fix: a writable --work-dir with free space",
                   dir);
  ::unlink(path.c_str());  // unnamed from now on: gone when closed, however the process ends
}

SpillFile::~SpillFile() {
  if (fd_ >= 0) ::close(fd_);
}

void SpillFile::write_all(const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw io_error(std::string("cannot write a scratch file: ") + std::strerror(errno) +
                         " (is the disk full?); the fix: a --work-dir with free space",
                     dir_);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

uint64_t SpillFile::append(std::string_view bytes) {
  const uint64_t at = size_;
  const auto len = static_cast<uint64_t>(bytes.size());
  buffer_.append(reinterpret_cast<const char*>(&len), sizeof len);
  buffer_.append(bytes);
  size_ += sizeof len + len;
  if (buffer_.size() >= kBufferBytes) flush();
  return at;
}

void SpillFile::flush() {
  write_all(buffer_.data(), buffer_.size());
  buffer_.clear();
  buffer_.shrink_to_fit();
}

void SpillFile::read(uint64_t offset, std::string* out) const {
  const auto pread_all = [&](char* p, size_t n, uint64_t at) {
    while (n > 0) {
      const ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(at));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        throw io_error(std::string("cannot read back a scratch file: ") +
                           (r == 0 ? "it is shorter than written" : std::strerror(errno)),
                       dir_);
      p += r;
      at += static_cast<uint64_t>(r);
      n -= static_cast<size_t>(r);
    }
  };
  uint64_t len = 0;
  pread_all(reinterpret_cast<char*>(&len), sizeof len, offset);
  MTNLG_CHECK_MSG(offset + sizeof len + len <= size_, "SpillFile: a record past the end");
  out->resize(static_cast<size_t>(len));
  pread_all(out->data(), out->size(), offset + sizeof len);
}

}  // namespace mtnlg::curate
