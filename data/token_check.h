// Token ids against the model's vocabulary, checked when a run starts, not when a bad sample is
// drawn (which could be days in). Each dataset's .bin is scanned once, in one vectorised pass, and
// its largest id kept in the index cache (data.cache_dir), so a restart reads it back.
#pragma once

#include <cstdint>
#include <string>

#include "core/config/recipe.h"
#include "data/indexed_dataset.h"

namespace mtnlg {

// The largest token id in `dataset` (-1 for an empty one; a negative int32 id is corruption
// naming the .bin), from the cache in `cache_dir` (empty: no cache) or a scan.
int64_t max_token_id(const IndexedDataset& dataset, const std::string& cache_dir);

// Every dataset of cfg.blend holds only ids < vocab_size; else invalid_argument naming the file,
// the id, data.blend[k] and model.vocab_size.
void check_token_ids(const DataConfig& cfg, int64_t vocab_size);

}  // namespace mtnlg
