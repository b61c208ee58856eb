// SequentialGPTDataset: fixed-length training samples cut in order from the documents of one
// split of an IndexedDataset, plus Megatron's rule for splitting documents train/valid/test.
//
// "Documents" here are the .idx file's sequences, as in Megatron-LM's GPTDataset (its
// numel_low_level_dataset, split and indices count sequences): one per document as usually
// preprocessed, one per sentence with --split-sentences, none for an empty document (which is
// therefore skipped). Splitting by the .idx's document table instead moves the split boundaries
// whenever those differ, and with them every sample (found against Megatron's own code:
// tests/data/megatron_order_test.cc).
//
// The token stream is the sequences of the range in order, back to back; it repeats forever. Sample
// i is tokens [i*S, i*S + S + 1) of that repeating stream: S inputs and, shifted by one, S labels.
// Consecutive samples overlap by one token, a sample may straddle the end of an epoch (it wraps to
// the first token), and nothing is masked at end-of-document tokens. There is no shuffling: the GPT
// dataset with document/sample/shuffle indices builds on the same split rule.
//
// Example, S = 3, documents [a b c] [d e] (T = 5 tokens per epoch):
//   sample 0 = a b c d, sample 1 = d e a b, sample 2 = b c d e, sample 3 = e a b c, ...
//
// Ownership: holds a shared reference to the IndexedDataset. Immutable after construction:
// const methods are safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "data/sample_source.h"

namespace mtnlg {

enum class Split { kTrain = 0, kValid = 1, kTest = 2 };
const char* split_name(Split split);  // "train", "valid", "test"

// Documents [begin, end) of an IndexedDataset.
// Sequences [begin, end) of an IndexedDataset (Megatron's GPTDataset "documents", above).
struct DocumentRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
};

// Megatron's split rule (megatron/core/datasets: _get_split_indices): normalise the three
// ratios to sum to 1, take b[k+1] = b[k] + round(ratio_k * num_documents) with Python's
// round-half-to-even, then shift b[1..3] by (b[3] - num_documents) so b[3] == num_documents.
// Split k is documents [b[k], b[k+1]). Throws invalid_argument naming data.split unless
// `split` is three finite non-negative numbers with a positive sum.
std::array<int64_t, 4> split_boundaries(int64_t num_documents, const std::vector<double>& split);

// The documents (sequences) of one split, from the dataset's num_sequences(). Throws
// invalid_argument naming data.split if the train split is empty; an empty valid or test split is
// returned as an empty range.
DocumentRange split_range(const IndexedDataset& dataset, const std::vector<double>& split,
                          Split which);

// Reads every token of the range once; throws invalid_argument naming the .bin file, the
// first id >= vocab_size (or negative) and its place, and the fix (set model.vocab_size).
void check_vocab_range(const IndexedDataset& dataset, DocumentRange documents, int64_t vocab_size);

class SequentialGPTDataset : public SampleSource {
 public:
  // Throws invalid_argument if seq_length < 1, or the range is empty or holds no tokens
  // (naming data.split). The range must lie within the dataset's documents (checked).
  SequentialGPTDataset(std::shared_ptr<const IndexedDataset> dataset, int64_t seq_length,
                       DocumentRange documents);

  const IndexedDataset& dataset() const { return *dataset_; }
  DocumentRange documents() const { return documents_; }
  int64_t seq_length() const override { return seq_length_; }
  int64_t tokens_per_epoch() const { return prefix_.back(); }
  // The stream repeats forever: every i >= 0 is a sample.
  int64_t size() const override { return std::numeric_limits<int64_t>::max(); }

  // Writes tokens [i*S, i*S + S + 1) of the repeating stream to out[0, S+1). i >= 0.
  void sample(int64_t i, int32_t* out) const override;

  // Reads every token of the range once; throws invalid_argument naming the .bin file, the
  // first id >= vocab_size (or negative) and its place, and the fix (set model.vocab_size).
  void check_vocab(int64_t vocab_size) const override;
  std::string description() const override;

 private:
  std::shared_ptr<const IndexedDataset> dataset_;
  int64_t seq_length_;
  DocumentRange documents_;
  int64_t first_sequence_;       // the range's sequences are [first_sequence_, +prefix_.size()-1)
  std::vector<int64_t> prefix_;  // prefix_[k]: stream offset of the range's k-th sequence
};

}  // namespace mtnlg
