// Durable file operations for checkpoints: write-then-fsync-then-rename, directory fsync, and the
// xxHash3 checksums the manifest records (Debian's libxxhash; not a checksum of our own).
//
// Why this much ceremony: a crash or kill -9 at any moment of a save must leave every committed
// file either absent or complete. rename() is atomic, but only durable once the directory entry
// is flushed (fsync of the directory); a file's bytes only once the file is fsynced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace mtnlg {

// Closes on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// Throws io_error "what: strerror(errno)" naming `path`.
[[noreturn]] void throw_errno(const std::string& what, const std::string& path);

// XXH3 64-bit over a stream of bytes.
class Checksum {
 public:
  Checksum();
  ~Checksum();
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;
  void update(const void* data, size_t bytes);
  uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// "xxh3:0123456789abcdef", and back (false on any other text).
std::string checksum_text(uint64_t digest);
bool parse_checksum_text(const std::string& text, uint64_t* digest);

// Writes all of `bytes` (retrying short writes and EINTR), adding them to `sum` if given.
void write_all(int fd, const void* data, size_t bytes, const std::string& path,
               Checksum* sum = nullptr);
void fsync_dir(const std::string& dir);
// `path` holds exactly `content` or its previous state: a temp file beside it, fsync, rename,
// directory fsync.
void write_file_atomic(const std::string& path, const std::string& content);
// A file's size and checksum.
struct FileDigest {
  int64_t bytes = 0;
  uint64_t xxh3 = 0;
};

}  // namespace mtnlg
