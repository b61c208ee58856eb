// IndexedDataset: read access to a Megatron-LM indexed dataset (PREFIX.bin + PREFIX.idx,
// format in data/indexed_format.h), as written by Megatron's preprocess_data.py, by
// IndexedDatasetBuilder or by scripts/prepare_demo_data.py.
//
// open() maps both files and validates the index against itself and the size of .bin, so a
// dataset that opens can be read anywhere without further checks. The token file stays mapped
// (pages come in on demand); the sequence lengths and document indices are copied out of the
// index, because their offsets in the file are not aligned for int32/int64 access.
//
// Ownership: shared (open returns a shared_ptr; datasets built over it hold a reference).
// Immutable after open: every const method is safe to call from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/indexed_format.h"
#include "data/mapped_file.h"

namespace mtnlg {

class IndexedDataset {
 public:
  // Opens PREFIX.idx and PREFIX.bin. Throws not_found if either is missing, corruption if the
  // index is malformed or does not fit the token file, unsupported for a format version or
  // token dtype this reader does not handle. Messages name the file and the fix.
  static std::shared_ptr<IndexedDataset> open(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  std::string idx_path() const { return prefix_ + idx_format::kIdxSuffix; }
  std::string bin_path() const { return prefix_ + idx_format::kBinSuffix; }
  TokenType token_type() const { return token_type_; }

  int64_t num_sequences() const { return static_cast<int64_t>(lengths_.size()); }
  // Documents are [document_indices()[i], document_indices()[i+1]) in sequences.
  int64_t num_documents() const { return static_cast<int64_t>(document_indices_.size()) - 1; }
  int64_t num_tokens() const { return num_tokens_; }  // sum of all sequence lengths

  int64_t sequence_length(int64_t seq) const;
  std::span<const int32_t> sequence_lengths() const { return lengths_; }
  std::span<const int64_t> document_indices() const { return document_indices_; }

  // Copies tokens [offset, offset + count) of sequence `seq` into out[0, count) as int32.
  // Preconditions (checked): 0 <= seq < num_sequences, 0 <= offset, offset + count <= length.
  void read(int64_t seq, int64_t offset, int64_t count, int32_t* out) const;

 private:
  IndexedDataset(std::string prefix, MappedFile idx, MappedFile bin);
  void parse_index();
  int64_t sequence_pointer(int64_t seq) const;  // byte offset of the sequence in .bin

  std::string prefix_;
  MappedFile idx_;
  MappedFile bin_;
  TokenType token_type_ = TokenType::kUInt16;
  std::vector<int32_t> lengths_;           // [num_sequences]
  std::vector<int64_t> document_indices_;  // [num_documents + 1]
  size_t pointers_offset_ = 0;             // where the int64 pointers start in .idx
  int64_t num_tokens_ = 0;
};

}  // namespace mtnlg
