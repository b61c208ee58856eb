// DocumentReader: streams the documents of a corpus file in chunks, for mtnlg-preprocess.
//
//   jsonl  one JSON object per line (Megatron's preprocess_data.py input); a chunk carries the
//          raw lines, which the workers parse (so parsing runs in parallel). Blank lines are
//          skipped.
//   text   documents are blocks of lines separated by blank lines (empty or only whitespace);
//          a document is the bytes of its lines, line ends included.
//
// Each record keeps the 1-based line number where it starts, for error messages. Only one
// chunk is held at a time: memory stays bounded whatever the file size.
//
// Ownership: owns the open file. Not thread-safe (the pipeline's reader thread uses it).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace mtnlg {

enum class InputFormat { kJsonl, kText };

struct DocumentChunk {
  int64_t index = 0;                  // 0, 1, 2, ... in file order
  std::vector<std::string> records;   // jsonl: raw lines; text: documents
  std::vector<int64_t> line_numbers;  // [records]: where each record starts
  int64_t bytes = 0;                  // input bytes consumed by this chunk (blank lines too)
};

class DocumentReader {
 public:
  // Opens `path`; throws not_found (naming it) if it cannot.
  DocumentReader(const std::string& path, InputFormat format);
  ~DocumentReader();
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;

  // Fills *chunk with the next records, about `target_bytes` of input; false at end of file.
  // Throws io_error on a read error.
  bool next(size_t target_bytes, DocumentChunk* chunk);

  int64_t file_size() const { return file_size_; }

 private:
  bool read_line();  // into line_, with its '\n'; false at end of file

  std::string path_;
  InputFormat format_;
  std::FILE* file_ = nullptr;  // owned
  int64_t file_size_ = 0;
  char* buffer_ = nullptr;  // getline's buffer (malloc'ed by getline, freed in the destructor)
  size_t capacity_ = 0;
  std::string line_;
  int64_t line_number_ = 0;
  int64_t next_index_ = 0;
};

}  // namespace mtnlg
