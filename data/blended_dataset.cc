#include "data/blended_dataset.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/status.h"
#include "data/blending_rule.h"
#include "data/index_cache.h"

namespace mtnlg {

std::vector<double> normalize_blend_weights(const std::vector<double>& weights) {
  if (weights.empty()) {
    throw invalid_argument("data.blend is empty; the fix: list at least one dataset prefix",
                           "data.blend");
  }
  // Megatron stores the blend's dataset ids as int16.
  if (weights.size() > static_cast<size_t>(std::numeric_limits<int16_t>::max())) {
    throw invalid_argument("data.blend has " + std::to_string(weights.size()) +
                               " entries; a blend holds at most 32767 datasets (Megatron's "
                               "int16 dataset index); the fix: merge corpora with mtnlg-preprocess",
                           "data.blend");
  }
  double sum = 0.0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const std::string key = "data.blend[" + std::to_string(i) + "].weight";
    if (!std::isfinite(weights[i]) || weights[i] <= 0.0) {
      throw invalid_argument(key + " is " + std::to_string(weights[i]) +
                                 "; weights must be positive numbers (they are normalized to "
                                 "sum to 1); the fix: give it a positive weight or remove the "
                                 "entry",
                             key);
    }
    sum += weights[i];
  }
  std::vector<double> out(weights);
  for (double& w : out) w /= sum;
  return out;
}

int64_t blend_target_samples(double weight, int64_t total) {
  MTNLG_CHECK_GE(total, 0);
  return static_cast<int64_t>(std::ceil(static_cast<double>(total) * weight));
}

int64_t blend_source_samples(double weight, int64_t total) {
  // Megatron's mid-level surplus (mid_level_dataset_surplus 0.005) on the rounded-up target.
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(blend_target_samples(weight, total)) * 1.005));
}

int64_t blend_size(const std::vector<double>& normalized_weights, int64_t total) {
  int64_t size = 0;
  for (double w : normalized_weights) size += blend_target_samples(w, total);
  return size;
}

BlendingIndices build_blending_indices(const std::vector<double>& normalized_weights,
                                       int64_t size) {
  MTNLG_CHECK_GE(size, 0);
  const size_t n = normalized_weights.size();
  MTNLG_CHECK_GT(n, 0u);
  // Megatron's dtypes: int16 dataset ids (BlendedDataset refuses more datasets), int64 positions.
  MTNLG_CHECK_LE(n, static_cast<size_t>(std::numeric_limits<int16_t>::max()));
  BlendingIndices out{IndexArray(size, IndexType::kInt16), IndexArray(size, IndexType::kInt64)};
  blend_greedily(normalized_weights, size, [&out](int64_t i, size_t k, int64_t j) {
    out.dataset_index.set(i, static_cast<int64_t>(k));
    out.dataset_sample_index.set(i, j);
  });
  return out;
}

BlendedDataset::BlendedDataset(std::vector<std::unique_ptr<SampleSource>> sources,
                               const std::vector<double>& weights, int64_t size,
                               const std::string& cache_dir)
    : sources_(std::move(sources)), weights_(normalize_blend_weights(weights)), size_(size) {
  MTNLG_CHECK_EQ(sources_.size(), weights_.size());
  MTNLG_CHECK_GE(size_, 0);
  std::string sources_json = "[";
  for (size_t k = 0; k < sources_.size(); ++k) {
    MTNLG_CHECK(sources_[k] != nullptr);
    if (sources_[k]->seq_length() != sources_.front()->seq_length()) {
      throw invalid_argument("blended datasets must share one sequence length; data.blend[" +
                                 std::to_string(k) + "] has " +
                                 std::to_string(sources_[k]->seq_length()),
                             "data.blend");
    }
    sources_json += (k ? ", " : "") + sources_[k]->description();
  }
  sources_json += "]";
  std::string weights_json = "[";
  for (size_t k = 0; k < weights_.size(); ++k) {
    weights_json += (k ? ", " : "") + json_double(weights_[k]);
  }
  weights_json += "]";
  description_ = JsonText()
                     .add("class", "BlendedDataset")
                     .add("format_version", kFormatVersion)
                     .add("size", size_)
                     .add_raw("weights", weights_json)
                     .add_raw("datasets", sources_json)
                     .str();

  IndexCache cache(cache_dir, "BlendedDataset", description_);
  if (cache.present()) {
    indices_.dataset_index = cache.load("dataset_index", size_);
    indices_.dataset_sample_index = cache.load("dataset_sample_index", size_);
    built_from_cache_ = true;
  } else {
    indices_ = build_blending_indices(weights_, size_);
  }
  // Every pick must exist in its source (the builder's 1.005 margin covers the greedy's
  // one-sample lead); checked for cached indices too, which must match their sources.
  std::vector<int64_t> needed(sources_.size(), 0);
  for (int64_t i = 0; i < size_; ++i) {
    const int64_t k = indices_.dataset_index[i];
    MTNLG_CHECK(k >= 0 && k < static_cast<int64_t>(sources_.size()));
    needed[static_cast<size_t>(k)] =
        std::max(needed[static_cast<size_t>(k)], indices_.dataset_sample_index[i] + 1);
  }
  for (size_t k = 0; k < sources_.size(); ++k) {
    if (needed[k] > sources_[k]->size()) {
      throw invalid_argument(
          "data.blend[" + std::to_string(k) + "] holds " + std::to_string(sources_[k]->size()) +
              " samples but its share " + "of the blend's " + std::to_string(size_) + " needs " +
              std::to_string(needed[k]) + "; the fix: size it with blend_source_samples",
          "data.blend");
    }
  }
  if (!built_from_cache_) {
    cache.store("dataset_index", indices_.dataset_index);
    cache.store("dataset_sample_index", indices_.dataset_sample_index);
    cache.commit();
  }
  spdlog::info("BlendedDataset: {} samples over {} datasets{}", size_, sources_.size(),
               built_from_cache_ ? " (indices from cache)" : "");
}

void BlendedDataset::sample(int64_t i, int32_t* out) const {
  MTNLG_CHECK_GE(i, 0);
  MTNLG_CHECK_LT(i, size_);
  sources_[static_cast<size_t>(indices_.dataset_index[i])]->sample(indices_.dataset_sample_index[i],
                                                                   out);
}

void BlendedDataset::check_vocab(int64_t vocab_size) const {
  for (const auto& s : sources_) s->check_vocab(vocab_size);
}

}  // namespace mtnlg
