// StagedFile: an output file written as `path`.tmp and renamed into place by commit() after a
// flush and fsync, so that a killed stage never leaves a half-written file under the final name
// (its rerun starts that file over). Destroyed without commit(), it removes the temporary file.
// Write errors throw io_error naming the file and asking whether the disk is full.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace mtnlg::curate {

class StagedFile {
 public:
  explicit StagedFile(std::string path);
  ~StagedFile();
  StagedFile(const StagedFile&) = delete;
  StagedFile& operator=(const StagedFile&) = delete;

  void write(const void* data, size_t n);
  // Overwrites bytes at `offset` (a header whose values are known at the end).
  void write_at(int64_t offset, const void* data, size_t n);
  void commit();
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, tmp_;
  std::FILE* file_ = nullptr;
};

// `text` as the whole of `path`, staged and renamed as above.
void write_whole_file(const std::string& path, std::string_view text);

}  // namespace mtnlg::curate
