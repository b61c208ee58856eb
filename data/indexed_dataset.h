// IndexedDataset: read access to a Megatron-LM indexed dataset (PREFIX.bin + PREFIX.idx,
// format in data/indexed_format.h), as written by Megatron's preprocess_data.py, by
// IndexedDatasetBuilder or by scripts/prepare_demo_data.py.
//
// open() maps both files and validates the index against itself and the size of .bin, so a
// dataset that opens can be read anywhere without further checks. The token file stays mapped
// (pages come in on demand); so do the index's arrays: their offsets in the file are not aligned
// for int32/int64 access, so they are read with memcpy-based loads rather than copied out
// (copying 1.2 GB of arrays for a 100M-document corpus cost seconds and doubled memory).
//
// Ownership: shared (open returns a shared_ptr; datasets built over it hold a reference).
// Immutable after open: every const method is safe to call from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

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

  int64_t num_sequences() const { return num_sequences_; }
  // Document d is sequences [document_index(d), document_index(d+1)).
  int64_t num_documents() const { return num_documents_; }
  int64_t num_tokens() const { return num_tokens_; }  // sum of all sequence lengths

  // Precondition (checked): 0 <= seq < num_sequences.
  int64_t sequence_length(int64_t seq) const;
  // Precondition (checked): 0 <= i <= num_documents.
  int64_t document_index(int64_t i) const;
  // Tokens of document `doc` (the sum of its sequences' lengths). Unchecked: hot in index builds.
  int64_t document_length(int64_t doc) const;

  // Raw, possibly unaligned little-endian arrays of the index (for hashing its contents):
  // int32 lengths[num_sequences] and int64 document indices[num_documents + 1].
  std::span<const uint8_t> raw_sequence_lengths() const;
  std::span<const uint8_t> raw_document_indices() const;
  // The whole .bin: every token, little-endian, of token_type() (for scanning its ids).
  std::span<const uint8_t> raw_tokens() const { return {bin_.data(), bin_.size()}; }

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
  int64_t num_sequences_ = 0;
  int64_t num_documents_ = 0;
  bool one_sequence_per_document_ = false;  // document_index(d) == d: Megatron's usual layout
  size_t lengths_offset_ = 0;               // where the int32 lengths start in .idx
  size_t pointers_offset_ = 0;              // where the int64 pointers start in .idx
  size_t documents_offset_ = 0;             // where the int64 document indices start in .idx
  int64_t num_tokens_ = 0;
};

}  // namespace mtnlg
