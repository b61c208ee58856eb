// The three index arrays of Megatron-LM's GPTDataset (megatron/core/datasets/gpt_dataset.py and
// helpers.cpp build_sample_idx), built as plain functions so that tests check them directly.
//
// For a split's documents D (the .idx's sequences, as data/gpt_dataset.h explains; ids
// d_0..d_{D-1}, T tokens in all), a requested number of samples
// n and a sequence length S:
//   epochs           the smallest E >= 1 with E*T >= n*S + 1 (each sample needs S+1 tokens).
//   document index   the split's document ids tiled E times and shuffled as one array; with a
//                    separate final epoch, the first E-1 copies shuffled as one and then the
//                    last copy on its own (so the partial final epoch's documents come last).
//   sample index     N+1 boundaries, N = (E*T - 1) / S: boundary i is (position in the
//                    document index, token offset in that document) of stream token i*S.
//                    Sample i is the stream from boundary i to boundary i+1 inclusive: S+1
//                    tokens, overlapping the next sample by one and crossing documents.
//   shuffle index    a permutation of [0, N). With a separate final epoch it is a permutation
//                    of the samples before the final epoch followed by one of the rest, so the
//                    partial final epoch's samples come last.
// Separate final epoch (Megatron's rule): with E > 1, let n_before = ((E-1)*T - 1) / S samples
// precede the final epoch and n_epoch = (T - 1) / S; the final epoch is separate when
// n - n_before < int(0.8 * n_epoch), i.e. less than 80% of it is needed.
//
// Shuffles are numpy's: one RandomState(seed) per dataset (data/numpy_random.h) shuffles the
// document index and then the shuffle index, in Megatron-LM's order, so both equal Megatron's
// for the same documents, seed, sequence length and sample count (megatron/core/datasets/
// gpt_dataset.py, checked against a numpy transcription of its index functions in
// tests/data/megatron_indices_check.py).
//
// Example, documents [a b c] [d e] (T = 5), S = 2, n = 4, no shuffle: E = 2 (2*5 >= 9),
// document index 0 1 0 1, N = 4, boundaries (0,0) (0,2) (1,1) (2,1) (3,0):
// samples "a b c", "c d e", "e a b", "b c d".
//
// Ownership: IndexArray owns its values. Functions are pure; nothing here is shared.
#pragma once

#include <cstdint>
#include <vector>

#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/numpy_random.h"

namespace mtnlg {

// The element types of the index arrays, as Megatron-LM stores them (numpy dtypes).
enum class IndexType : uint8_t { kInt16, kInt32, kUInt32, kInt64 };
int index_type_width(IndexType type);         // bytes per value: 2, 4, 4, 8
const char* index_type_name(IndexType type);  // numpy's name: "int16", "int32", "uint32", "int64"

// An index array of one element type; values are read and written as int64.
class IndexArray {
 public:
  IndexArray() = default;
  IndexArray(int64_t size, IndexType type);

  IndexType type() const { return type_; }
  int width() const { return index_type_width(type_); }
  int64_t size() const { return size_; }
  int64_t operator[](int64_t i) const {
    const auto k = static_cast<size_t>(i);
    switch (type_) {
      case IndexType::kInt16:
        return i16_[k];
      case IndexType::kInt32:
        return i32_[k];
      case IndexType::kUInt32:
        return u32_[k];
      case IndexType::kInt64:
        break;
    }
    return i64_[k];
  }
  // v must fit the type (callers choose the type from the largest value).
  void set(int64_t i, int64_t v) {
    const auto k = static_cast<size_t>(i);
    switch (type_) {
      case IndexType::kInt16:
        i16_[k] = static_cast<int16_t>(v);
        return;
      case IndexType::kInt32:
        i32_[k] = static_cast<int32_t>(v);
        return;
      case IndexType::kUInt32:
        u32_[k] = static_cast<uint32_t>(v);
        return;
      case IndexType::kInt64:
        break;
    }
    i64_[k] = v;
  }
  void* data();
  const void* data() const;
  size_t bytes() const { return static_cast<size_t>(size_) * static_cast<size_t>(width()); }
  bool operator==(const IndexArray& o) const;

 private:
  IndexType type_ = IndexType::kInt32;
  int64_t size_ = 0;
  std::vector<int16_t> i16_;  // the one of these four that type_ names holds the values
  std::vector<int32_t> i32_;
  std::vector<uint32_t> u32_;
  std::vector<int64_t> i64_;
};

// Tokens of the range's documents, and the longest document (to size the sample index).
struct RangeTokens {
  int64_t tokens = 0;
  int64_t longest_document = 0;
};
RangeTokens count_range_tokens(const IndexedDataset& dataset, DocumentRange documents);

// The smallest E >= 1 with E * tokens_per_epoch >= num_samples * seq_length + 1.
int64_t num_epochs_for(int64_t tokens_per_epoch, int64_t num_samples, int64_t seq_length);
// Samples of E epochs: (E * tokens_per_epoch - 1) / seq_length.
int64_t num_samples_of(int64_t epochs, int64_t tokens_per_epoch, int64_t seq_length);
// Megatron's separate_final_epoch rule (see the file comment).
bool separate_final_epoch(int64_t epochs, int64_t tokens_per_epoch, int64_t num_samples,
                          int64_t seq_length);

// Shuffles a[begin, end) in place as numpy's RandomState.shuffle does, drawing from `rng`.
void shuffle_range(IndexArray& a, int64_t begin, int64_t end, NumpyRandomState& rng);

// E copies of the range's document ids; with `shuffle`, permuted as Megatron's
// _build_document_index does (separate_final: the last copy apart), drawing from `rng`. int32
// as Megatron's (int64 for document ids past int32, where Megatron's cast would wrap).
IndexArray build_document_index(DocumentRange documents, int64_t epochs, bool separate_final,
                                bool shuffle, NumpyRandomState& rng);
// 2 * (num_samples + 1) values: (document index position, offset) of each boundary. The
// document index must hold at least num_samples * seq_length + 1 tokens (checked). int32 when
// the document index's length and the longest document fit it, else int64 (Megatron's rule).
IndexArray build_sample_index(const IndexedDataset& dataset, const IndexArray& document_index,
                              int64_t seq_length, int64_t num_samples, int64_t longest_document);
// A permutation of [0, num_samples): [0, first) and then [first, num_samples) shuffled
// separately (first == num_samples: one shuffle), drawing from `rng`. Without `shuffle`, the
// identity. uint32 below 2^32 - 2 values, else int64 (Megatron's _build_shuffle_index).
IndexArray build_shuffle_index(int64_t num_samples, int64_t first, bool shuffle,
                               NumpyRandomState& rng);

}  // namespace mtnlg
