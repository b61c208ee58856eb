// GPTDataset: Megatron-LM's GPT dataset over one split of an IndexedDataset: samples of S+1
// tokens cut from the split's documents in a shuffled order, through the document, sample and
// shuffle indices described in data/gpt_indices.h. The indices are cached in
// GPTDatasetConfig::cache_dir (data/index_cache.h) and reused by later constructions with the
// same description.
//
// With shuffle = false the documents keep file order and the shuffle index is the identity,
// so sample i equals SequentialGPTDataset's sample i for every i < size().
//
// Ownership: holds a shared reference to the IndexedDataset and owns its index arrays.
// Immutable after construction: const methods are safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/gpt_dataset.h"
#include "data/gpt_indices.h"
#include "data/indexed_dataset.h"
#include "data/sample_source.h"

namespace mtnlg {

struct GPTDatasetConfig {
  int64_t seq_length = 0;
  int64_t num_samples = 0;  // requested; size() is at least this (whole epochs are indexed)
  uint64_t seed = 1234;
  bool shuffle = true;
  std::string cache_dir;  // empty: build in memory every time
};

class GPTDataset : public SampleSource {
 public:
  // Version of the index layout and shuffle algorithm: part of every cache description, so a
  // change here makes old caches miss instead of being misread.
  // 4: indices over the .idx's sequences, as Megatron's (3: over its documents); 3: the shuffle
  // index stored as uint32 (Megatron's dtype); 2: numpy RandomState shuffles in Megatron's order
  // (1: Philox, per-epoch document shuffles).
  static constexpr int64_t kFormatVersion = 4;

  // Throws invalid_argument if seq_length < 1, num_samples < 0, or the range is empty or holds
  // no tokens (naming data.split); corruption if a cache entry with this name is damaged or
  // was built for something else; io_error if the cache cannot be written.
  GPTDataset(std::shared_ptr<const IndexedDataset> dataset, DocumentRange documents,
             const GPTDatasetConfig& config);

  int64_t size() const override { return shuffle_index_.size(); }
  int64_t seq_length() const override { return config_.seq_length; }
  // Writes the S+1 tokens of shuffled sample i: the stream between its sample-index
  // boundaries.
  void sample(int64_t i, int32_t* out) const override;
  void check_vocab(int64_t vocab_size) const override;
  std::string description() const override { return description_; }

  const IndexedDataset& dataset() const { return *dataset_; }
  const GPTDatasetConfig& config() const { return config_; }
  DocumentRange documents() const { return documents_; }
  int64_t tokens_per_epoch() const { return tokens_per_epoch_; }
  int64_t num_epochs() const { return num_epochs_; }
  bool separate_final_epoch() const { return separate_final_epoch_; }
  bool built_from_cache() const { return built_from_cache_; }
  const std::string& cache_description_path() const { return cache_description_path_; }

  const IndexArray& document_index() const { return document_index_; }
  const IndexArray& sample_index() const { return sample_index_; }  // (position, offset) pairs
  const IndexArray& shuffle_index() const { return shuffle_index_; }

 private:
  void build();

  std::shared_ptr<const IndexedDataset> dataset_;
  DocumentRange documents_;
  GPTDatasetConfig config_;
  int64_t tokens_per_epoch_ = 0;
  int64_t longest_document_ = 0;
  int64_t num_epochs_ = 0;
  int64_t num_samples_total_ = 0;
  bool separate_final_epoch_ = false;
  bool built_from_cache_ = false;
  std::string description_;
  std::string cache_description_path_;
  IndexArray document_index_;
  IndexArray sample_index_;
  IndexArray shuffle_index_;
};

}  // namespace mtnlg
