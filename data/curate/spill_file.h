// SpillFile: an unnamed scratch file in a directory, for what a stage would otherwise hold in
// memory (dedup's candidate texts). It is unlinked as soon as it is made, so nothing is left on
// disk however the process ends (kill -9 included); the kernel's page cache, not the process,
// holds what is read often. Records are appended and read back by the offset append() returned.
//
// append() is not thread-safe; read() is (pread), once the appends are done.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mtnlg::curate {

class SpillFile {
 public:
  // A scratch file in `dir`; throws io_error naming the directory if it cannot be made.
  explicit SpillFile(const std::string& dir);
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  // Appends `bytes` as one record; returns its offset for read(). Throws io_error (disk full).
  uint64_t append(std::string_view bytes);
  // Writes what append() buffered; call before the first read().
  void flush();
  // The record at `offset` into *out.
  void read(uint64_t offset, std::string* out) const;
  uint64_t size() const { return size_; }

 private:
  void write_all(const char* p, size_t n);
  std::string dir_;
  int fd_ = -1;
  uint64_t size_ = 0;   // bytes appended, buffered included
  std::string buffer_;  // appends not yet written
};

}  // namespace mtnlg::curate
