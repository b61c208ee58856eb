// IndexedDatasetBuilder: writes a Megatron-LM indexed dataset (PREFIX.bin + PREFIX.idx, format
// in data/indexed_format.h) as Megatron's preprocess_data.py does: a document is one sequence,
// or one per sentence (--split-sentences), or none (empty text: the document is still recorded).
//
// Tokens stream to PREFIX.bin.tmp-<pid> as documents arrive; finish() writes the index to
// PREFIX.idx.tmp-<pid>, flushes both to disk and renames them into place (.bin first, .idx
// last), so the final names never hold a half-written file. Destroying a builder without
// finish() removes the temporary files and leaves any existing dataset untouched.
//
// Ownership: the builder owns its temporary files. Not thread-safe (one writer).
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "data/indexed_format.h"

namespace mtnlg {

class IndexedDatasetBuilder {
 public:
  // Creates the temporary token file; throws io_error if it cannot (e.g. missing directory).
  IndexedDatasetBuilder(const std::string& prefix, TokenType token_type);
  ~IndexedDatasetBuilder();
  IndexedDatasetBuilder(const IndexedDatasetBuilder&) = delete;
  IndexedDatasetBuilder& operator=(const IndexedDatasetBuilder&) = delete;

  // Appends one document: its tokens as one sequence, or, with `sequence_lengths`, as those
  // sequences (positive lengths summing to the tokens). No tokens: a document of no sequences.
  // Throws invalid_argument for a negative id or, for uint16 files, an id above 65535 (the fix:
  // build with TokenType::kInt32).
  void add_document(std::span<const int32_t> tokens,
                    std::span<const int32_t> sequence_lengths = {});

  // Writes the index and commits both files under their final names. Call once.
  void finish();

  int64_t num_documents() const { return static_cast<int64_t>(document_index_.size()) - 1; }
  int64_t num_sequences() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t num_tokens() const { return num_tokens_; }

 private:
  void write_bin(const void* data, size_t bytes);
  void remove_temps() noexcept;

  std::string prefix_;
  TokenType token_type_;
  std::string bin_tmp_;
  std::string idx_tmp_;
  std::FILE* bin_ = nullptr;                   // owned; closed by finish() or the destructor
  std::vector<int32_t> lengths_;               // per sequence
  std::vector<int64_t> document_index_ = {0};  // sequences before each document, and the total
  int64_t num_tokens_ = 0;
  bool finished_ = false;
  std::vector<uint16_t> staging_;  // uint16 conversion buffer, reused across documents
};

}  // namespace mtnlg
