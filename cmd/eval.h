// Loss and perplexity of a model on data (mtnlg-eval): a recipe's valid or test samples, in the
// order and sizing the trainer reads them, or every token of a .bin/.idx file.
//
//   recipe split   samples [0, count) of the split in the run's order, the split sized as the
//                  run sizes it (cmd/data_samples.h; Megatron's GPTDataset/blend order); count:
//                  eval.iters x global_batch_size, what the run's first evaluation (valid) or
//                  its test evaluation read, or max_samples
//   .bin/.idx      the file's sequences back to back, cut into consecutive samples of S + 1
//                  tokens overlapping by one ((T - 1) / S of them, every token but the first
//                  predicted once), or the first max_samples
// The loss is the mean next-token cross entropy over the samples' S labels each, computed by the
// training forward pass (GPTStage) in evaluation mode, as the trainer's evaluation computes it;
// ppl = exp(loss).
//
// Ownership: evaluate() borrows the model and the source. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/progress.h"
#include "data/sample_source.h"
#include "model/gpt_stage.h"

namespace mtnlg {

struct EvalResult {
  double loss = 0;
  double ppl = 0;
  int64_t samples = 0;
  int64_t tokens = 0;  // labels scored: samples x seq_length
};

// Mean loss of samples [0, count) of `source` in micro-batches of `micro_batch` (the last one
// may be smaller). The source's seq_length must be the model's (checked). `progress`: how the
// samples scored so far are shown (core/progress.h).
EvalResult evaluate(GPTStage& model, const SampleSource& source, int64_t count, int64_t micro_batch,
                    ProgressMode progress = ProgressMode::kNone);

}  // namespace mtnlg
