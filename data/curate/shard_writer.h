// ShardWriter: a JSON Lines shard written line by line, compressed as its name says (.gz,
// .zst, else plain; data/curate/line_reader.h reads them back), into `path`.tmp, then flushed,
// synced and renamed into place by commit(): a killed stage leaves no half-written shard under
// the final name, and its rerun starts that shard over. Without commit() the temporary file is
// removed. The compressed bytes depend only on the lines (fixed levels, one thread), so a rerun
// writes the same file.
//
// Not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "data/curate/line_reader.h"
#include "data/curate/staged_file.h"

namespace mtnlg::curate {

class ShardWriter {
 public:
  explicit ShardWriter(std::string path);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Writes `line` and a '\n'.
  void write_line(std::string_view line);
  void commit();
  int64_t lines() const { return lines_; }

 private:
  void compress(const void* data, size_t n, bool finish);

  struct Codec;
  StagedFile file_;
  std::unique_ptr<Codec> codec_;
  std::string pending_;  // uncompressed bytes not yet handed to the codec
  int64_t lines_ = 0;
};

}  // namespace mtnlg::curate
