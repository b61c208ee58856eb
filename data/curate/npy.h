// NumPy .npy files of uint32 rows ([rows, cols], C order, little-endian '<u4'): the signature
// files of dedup, which numpy.load reads as they are.
//
// NpyU32Writer streams rows into `path`.tmp and, at commit(), writes the final shape into the
// header (a fixed 128-byte header, padded with spaces as the format allows) and renames the
// file into place: a killed writer leaves no half-written `path`. Without commit() the
// temporary file is removed.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/curate/staged_file.h"

namespace mtnlg::curate {

class NpyU32Writer {
 public:
  NpyU32Writer(std::string path, int64_t cols);
  NpyU32Writer(const NpyU32Writer&) = delete;
  NpyU32Writer& operator=(const NpyU32Writer&) = delete;

  // Appends `rows` rows of cols values each.
  void append(const uint32_t* data, int64_t rows);
  // Header with the final shape, flushed, synced and renamed to `path`.
  void commit();
  int64_t rows() const { return rows_; }

 private:
  StagedFile file_;
  int64_t cols_;
  int64_t rows_ = 0;
};

// A whole .npy of '<u4' in C order, 2-D; throws corruption naming the file otherwise.
struct NpyU32 {
  int64_t rows = 0, cols = 0;
  std::vector<uint32_t> data;
};
NpyU32 read_npy_u32(const std::string& path);

}  // namespace mtnlg::curate
