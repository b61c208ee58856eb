#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/status.h"

namespace mtnlg {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

}  // namespace

InputFile::InputFile(const std::string& path, const std::string& missing_fix) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) {
    const int err = errno;
    if (err == ENOENT)
      throw not_found("no such file" + (missing_fix.empty() ? "" : ": " + missing_fix), path);
    throw io_error(std::string("cannot open: ") + std::strerror(err), path);
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw io_error(std::string("cannot stat: ") + std::strerror(err), path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw io_error(std::string("not a regular file (it is ") + kind_of(st.st_mode) +
                       "); give the path of a file",
                   path);
  }
  // Reads of a regular file never block anyway; clear the flag so nothing downstream sees it.
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
  size_ = static_cast<int64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

int InputFile::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

std::string InputFile::read_all() {
  std::string out;
  out.reserve(static_cast<size_t>(size_));
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd_, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw io_error(std::string("cannot read: ") + std::strerror(errno), path_);
    }
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

std::string read_input_file(const std::string& path, const std::string& missing_fix) {
  InputFile f(path, missing_fix);
  return f.read_all();
}

}  // namespace mtnlg
