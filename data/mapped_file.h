// MappedFile: a whole file mapped read-only into memory (mmap), unmapped on destruction.
//
// The mapping is owned by the object (move-only). An empty file maps to no memory: data() is
// nullptr and size() is 0. The bytes are immutable, so concurrent reads from any thread are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mtnlg {

class MappedFile {
 public:
  // Throws not_found if `path` does not exist, io_error if it cannot be opened or mapped.
  // `what_fix` is appended to the not-found message (how to produce the file).
  explicit MappedFile(const std::string& path, const std::string& what_fix = "");
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void unmap();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mtnlg
