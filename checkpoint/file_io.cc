#include "checkpoint/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/status.h"

namespace mtnlg {

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

void throw_errno(const std::string& what, const std::string& path) {
  throw io_error(what + ": " + std::strerror(errno), path);
}

struct Checksum::State {
  XXH3_state_t* s = XXH3_createState();
  ~State() { XXH3_freeState(s); }
};

Checksum::Checksum() : state_(std::make_unique<State>()) {
  MTNLG_CHECK_MSG(state_->s != nullptr, "XXH3_createState failed");
  XXH3_64bits_reset(state_->s);
}

Checksum::~Checksum() = default;

void Checksum::update(const void* data, size_t bytes) {
  XXH3_64bits_update(state_->s, data, bytes);
}

uint64_t Checksum::digest() const {
  return XXH3_64bits_digest(state_->s);
}

std::string checksum_text(uint64_t digest) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "xxh3:%016llx", static_cast<unsigned long long>(digest));
  return buf;
}

bool parse_checksum_text(const std::string& text, uint64_t* digest) {
  if (text.size() != 21 || text.compare(0, 5, "xxh3:") != 0) return false;
  uint64_t v = 0;
  for (size_t i = 5; i < text.size(); ++i) {
    const char c = text[i];
    int d = 0;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return false;
    }
    v = v << 4 | static_cast<uint64_t>(d);
  }
  *digest = v;
  return true;
}

void write_all(int fd, const void* data, size_t bytes, const std::string& path, Checksum* sum) {
  if (sum != nullptr) sum->update(data, bytes);
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t w = ::write(fd, p, bytes);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_errno("cannot write", path);
    }
    p += w;
    bytes -= static_cast<size_t>(w);
  }
}

void fsync_dir(const std::string& dir) {
  Fd dfd(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() < 0) throw_errno("cannot open directory to fsync", dir);
  if (::fsync(dfd.get()) != 0) throw_errno("cannot fsync directory", dir);
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666));
    if (fd.get() < 0) throw_errno("cannot create", tmp);
    try {
      write_all(fd.get(), content.data(), content.size(), tmp);
      if (::fsync(fd.get()) != 0) throw_errno("cannot fsync", tmp);
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
    if (::close(fd.release()) != 0) throw_errno("cannot close", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    throw_errno("cannot rename " + tmp + " to", path);
  }
  fsync_dir(std::filesystem::path(path).parent_path().string());
}

}  // namespace mtnlg
