// What `mtnlg-data samples` prints: a recipe's samples in the order training reads them, so a
// user sees the data before spending a cluster on it (and builds the index caches the run will
// reuse).
//
// Training order is the sample order of the split's source (Loader: iteration k covers the
// samples [consumed, consumed + G) whatever the layout), and that order depends on how many
// samples the split is sized for (the epochs of the shuffle, a blend's per-dataset sizes), so
// the sizes here are the trainer's own: it calls split_num_samples too.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "core/config/recipe.h"
#include "data/gpt_dataset.h"

namespace mtnlg {

// Samples a run of `recipe` reads from split `which`:
//   train  the run's tokens / seq_length (with the batch ramp: optim/batch_ramp.h run_length)
//   valid  (iterations / eval.interval + 1) x eval.iters x global batch, every evaluation of
//          the run; invalid_argument naming eval.interval when the recipe does not evaluate
//   test   eval.iters x global batch (Megatron-LM sizes its test split as eval_iters batches)
int64_t split_num_samples(const Recipe& recipe, Split which);

enum class SampleFormat { kIds, kText };

struct SampleQuery {
  Split split = Split::kTrain;
  int64_t start = 0;  // the first sample's index in training order
  int64_t count = 0;
  SampleFormat format = SampleFormat::kIds;
  std::string vocab_file, merge_file;  // GPT-2 vocabulary, for kText
};

// Writes samples [start, start + count) of the split, one line each: kIds the seq_length + 1
// token ids separated by spaces (inputs, and the last one the final label); kText the same
// tokens decoded by GPT-2's BPE, as a JSON string (so newlines in the text stay on one line;
// bytes of a character cut by the sample's ends become U+FFFD).
// Throws invalid_argument naming --start or --count when the range passes the split's end, and
// data.split when the split has no documents; dataset errors as build_train_dataset's.
void print_samples(const Recipe& recipe, const SampleQuery& query, std::ostream& out);

}  // namespace mtnlg
