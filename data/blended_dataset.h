// BlendedDataset: a weighted mix of sample sources (Megatron-LM's blended_dataset.py and
// helpers.cpp build_blending_indices).
//
// Sample i of the blend goes to the source whose achieved share lags its target the most, as
// Megatron's helpers.cpp decides: error_k = w_k * max(i, 1) - count_k (count_k: samples given to
// source k before i), the largest error wins, ties go to the lowest k. Source k's j-th pick is
// its sample j, so each source is read in its own (shuffled) order. The (dataset index, dataset
// sample index) arrays are cached like GPTDataset's indices (data/index_cache.h), keyed by the
// sources' descriptions, the weights and the size.
//
// Sizing (Megatron's blended_megatron_dataset_builder.py): for a blend of n samples source k's
// target is ceil(n * w_k), the blend's length the sum of the targets (a few samples past n), and
// the builder asks source k for ceil(ceil(n * w_k) * 1.005) samples (the mid-level surplus).
// These match Megatron-LM's megatron/core/datasets as read at commits 00caa53
// (blended_megatron_dataset_builder.py) and 002398e (gpt_dataset.py).
//
// Ownership: owns its sources. Immutable after construction: const methods are safe from any
// thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/gpt_indices.h"
#include "data/sample_source.h"

namespace mtnlg {

// Weights divided by their sum. Throws invalid_argument naming data.blend[i].weight for a
// weight that is not a positive finite number, and data.blend if `weights` is empty.
std::vector<double> normalize_blend_weights(const std::vector<double>& weights);

// A source's target in a blend of `total`: ceil(total * weight).
int64_t blend_target_samples(double weight, int64_t total);
// Samples to request from it: ceil(ceil(total * weight) * 1.005).
int64_t blend_source_samples(double weight, int64_t total);
// The blend's length: the sum of its sources' targets.
int64_t blend_size(const std::vector<double>& normalized_weights, int64_t total);

// The greedy assignment above: dataset_index[i] (int16) and dataset_sample_index[i] (int64) for
// i < size, in Megatron's dtypes.
struct BlendingIndices {
  IndexArray dataset_index;
  IndexArray dataset_sample_index;
};
BlendingIndices build_blending_indices(const std::vector<double>& normalized_weights, int64_t size);

class BlendedDataset : public SampleSource {
 public:
  // 3: Megatron's dtypes (int16 dataset index, int64 sample index); 2: Megatron's max(i, 1)
  // (1: i + 1).
  static constexpr int64_t kFormatVersion = 3;

  // `weights` are normalized here (errors as normalize_blend_weights). All sources must share
  // one seq_length and hold enough samples for their share (invalid_argument otherwise).
  // cache_dir empty: no cache.
  BlendedDataset(std::vector<std::unique_ptr<SampleSource>> sources,
                 const std::vector<double>& weights, int64_t size, const std::string& cache_dir);

  int64_t size() const override { return size_; }
  int64_t seq_length() const override { return sources_.front()->seq_length(); }
  void sample(int64_t i, int32_t* out) const override;
  void check_vocab(int64_t vocab_size) const override;
  std::string description() const override { return description_; }

  const std::vector<double>& weights() const { return weights_; }
  const SampleSource& source(size_t k) const { return *sources_[k]; }
  size_t num_sources() const { return sources_.size(); }
  bool built_from_cache() const { return built_from_cache_; }
  const IndexArray& dataset_index() const { return indices_.dataset_index; }
  const IndexArray& dataset_sample_index() const { return indices_.dataset_sample_index; }

 private:
  std::vector<std::unique_ptr<SampleSource>> sources_;
  std::vector<double> weights_;  // normalized
  int64_t size_;
  bool built_from_cache_ = false;
  std::string description_;
  BlendingIndices indices_;
};

}  // namespace mtnlg
