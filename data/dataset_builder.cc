#include "data/dataset_builder.h"

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "data/blended_dataset.h"
#include "data/indexed_dataset.h"
#include "data/shuffled_gpt_dataset.h"

namespace mtnlg {
namespace {

// The datasets over the opened files, with their sample indices (built or loaded from the cache).
std::unique_ptr<SampleSource> build_indices(
    const DataConfig& cfg, int64_t seq_length, int64_t num_samples,
    const std::vector<double>& normalized,
    const std::vector<std::shared_ptr<IndexedDataset>>& indexed,
    const std::vector<DocumentRange>& ranges) {
  GPTDatasetConfig gpt;
  gpt.seq_length = seq_length;
  gpt.seed = cfg.seed;
  gpt.shuffle = cfg.shuffle;
  gpt.cache_dir = cfg.cache_dir;
  if (cfg.blend.size() == 1) {
    gpt.num_samples = num_samples;
    return std::make_unique<GPTDataset>(indexed.front(), ranges.front(), gpt);
  }
  std::vector<std::unique_ptr<SampleSource>> sources;
  for (size_t k = 0; k < cfg.blend.size(); ++k) {
    gpt.num_samples = blend_source_samples(normalized[k], num_samples);
    sources.push_back(std::make_unique<GPTDataset>(indexed[k], ranges[k], gpt));
  }
  return std::make_unique<BlendedDataset>(std::move(sources), normalized,
                                          blend_size(normalized, num_samples), cfg.cache_dir);
}

}  // namespace

std::unique_ptr<SampleSource> build_train_dataset(const DataConfig& cfg, int64_t seq_length,
                                                  int64_t num_samples, Split which) {
  if (num_samples < 1) {
    throw invalid_argument("a " + std::string(split_name(which)) + " dataset of " +
                               std::to_string(num_samples) +
                               " samples was requested; the fix: set schedule.train_iters or "
                               "schedule.train_tokens (and eval.iters) to positive values",
                           "schedule");
  }
  std::vector<double> weights;
  for (const auto& entry : cfg.blend) weights.push_back(entry.weight);
  const std::vector<double> normalized = normalize_blend_weights(weights);

  std::vector<std::shared_ptr<IndexedDataset>> indexed;
  std::vector<DocumentRange> ranges;
  size_t empty = 0;
  for (size_t k = 0; k < cfg.blend.size(); ++k) {
    const auto& entry = cfg.blend[k];
    indexed.push_back(IndexedDataset::open(entry.prefix));
    // An empty dataset is the data's fault, whatever data.split says.
    if (indexed.back()->num_sequences() == 0)
      throw invalid_argument(
          entry.prefix +
              " holds no (non-empty) documents; the fix: re-run mtnlg-preprocess on a "
              "non-empty corpus, or remove the entry from data.blend",
          "data.blend[" + std::to_string(k) + "].prefix");
    ranges.push_back(split_range(*indexed.back(), cfg.split, which));
    if (ranges.back().empty()) ++empty;
  }
  if (empty == cfg.blend.size()) return nullptr;  // only valid/test reach here (see header)
  for (size_t k = 0; k < ranges.size(); ++k) {
    if (!ranges[k].empty()) continue;
    const std::string key = "data.blend[" + std::to_string(k) + "]";
    throw invalid_argument("the " + std::string(split_name(which)) + " split of " +
                               cfg.blend[k].prefix + " has no documents (it has " +
                               std::to_string(indexed[k]->num_sequences()) +
                               ") while other datasets' have some; the fix: use a larger "
                               "dataset there, or change data.split",
                           key);
  }

  try {
    return build_indices(cfg, seq_length, num_samples, normalized, indexed, ranges);
  } catch (const Error& e) {
    // A data index too large for the machine (core/host_memory.h): the run's length sized it.
    if (e.code() != Code::kInvalidArgument || e.context() != "memory") throw;
    const bool train = which == Split::kTrain;
    throw invalid_argument(e.message() + "; the indices grow with the samples the " +
                               split_name(which) + " split draws: " +
                               (train ? "lower schedule.train_iters or schedule.train_tokens"
                                      : "lower eval.iters or raise eval.interval"),
                           train ? "schedule.train_iters" : "eval.iters");
  }
}

}  // namespace mtnlg
