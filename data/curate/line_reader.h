// LineReader: the lines of a JSON Lines shard, plain, gzip (.gz) or Zstandard (.zst), streamed
// with bounded memory: a 1 MiB window of the decompressed text at a time, whatever the file's
// size. The compression is chosen by the file's extension (what NeMo Curator and DataTrove
// write), never guessed from the bytes.
//
// Every line keeps its 1-based number for errors. A file that ends inside its compressed stream
// (a truncated .gz or .zst), a corrupt stream, or a read error throws Error (corruption or
// io_error) naming the file and the last line read. A gzip file of several members (cat a.gz
// b.gz) is read whole, as gzip -d does.
//
// Ownership: owns the open file. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace mtnlg::curate {

enum class Compression { kNone, kGzip, kZstd };

// By extension: .gz, .zst, anything else plain.
Compression compression_of(std::string_view path);

class LineReader {
 public:
  // Opens `path`; throws not_found naming it when it cannot.
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line, without its '\n' (and without a '\r' before it); false at the end. The last
  // line may lack its '\n'.
  bool next(std::string* line);
  // The next n bytes as they are (no line handling), for records of a known length (WARC);
  // false if the file ends first (*out then holds what was left). Lines read after it are
  // numbered on from the line count of those bytes.
  bool read_exact(size_t n, std::string* out);
  // The number of the line next() returned last (1-based; 0 before the first).
  int64_t line_number() const { return line_number_; }
  // Compressed bytes read so far and the file's size (for progress).
  int64_t bytes_read() const;
  int64_t file_size() const { return file_size_; }
  const std::string& path() const { return path_; }

 private:
  bool fill();  // more decompressed text into buf_; false at the end of the file

  struct Source;
  std::string path_;
  std::unique_ptr<Source> source_;
  int64_t file_size_ = 0;
  std::string buf_;  // decompressed text not yet returned, from pos_
  size_t pos_ = 0;
  int64_t line_number_ = 0;
};

}  // namespace mtnlg::curate
