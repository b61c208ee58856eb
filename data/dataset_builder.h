// build_train_dataset: the sample source a run reads, built from the recipe's data section as
// Megatron-LM's BlendedMegatronDatasetBuilder does.
//
//   one data.blend entry      a GPTDataset over its split, sized for num_samples
//   several entries           a GPTDataset per entry over its split, sized for its share with
//                             the 0.5% margin (blend_source_samples), mixed by a BlendedDataset
// data.shuffle, data.seed and data.cache_dir apply to every GPTDataset; the blend's indices
// are cached in data.cache_dir too.
//
// Ownership: the caller owns the returned source. Not synchronized (call from one thread).
#pragma once

#include <cstdint>
#include <memory>

#include "core/config/recipe.h"
#include "data/gpt_dataset.h"
#include "data/sample_source.h"

namespace mtnlg {

// Throws invalid_argument if num_samples < 1 or seq_length < 1, for bad weights (naming
// data.blend[i].weight), for a train split without documents (naming data.split), and for a
// valid/test split that is empty in some blend entries but not in all (naming data.blend[i]);
// returns nullptr when a valid/test split is empty in every entry (nothing to evaluate).
// Dataset files and caches raise the errors of IndexedDataset::open and GPTDataset.
std::unique_ptr<SampleSource> build_train_dataset(const DataConfig& cfg, int64_t seq_length,
                                                  int64_t num_samples, Split which);

}  // namespace mtnlg
