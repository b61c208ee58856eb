// The batch-size ramp and the run length it implies, both counted in tokens (the paper's
// units): Megatron-LM's rampup-batch-size rule, with `tokens` in place of samples.
#pragma once

#include <cstdint>
#include <functional>

#include "core/config/recipe.h"

namespace mtnlg {

// Megatron-LM's batch ramp, counted in tokens: with n = (global - start) / increment steps,
// the batch is start + increment * floor(consumed * n / rampup.tokens) while consumed <=
// rampup.tokens, and global_batch_size after. No ramp (start == 0): global_batch_size.
int64_t ramp_global_batch(const BatchConfig& batch, int64_t consumed_tokens);

// ramp_global_batch as a function of consumed samples of `seq_length` tokens (a copyable
// value: the loader's prefetch thread calls its own copy).
std::function<int64_t(int64_t)> global_batch_by_samples(const BatchConfig& batch,
                                                        int64_t seq_length);

struct RunLength {
  int64_t iterations = 0;
  int64_t tokens = 0;
};
// Iterations and tokens to the end of training with the ramp: each iteration takes the batch
// ramp_global_batch(tokens consumed before it); training ends after the iteration that reaches
// schedule.train_tokens, or after schedule.train_iters, whichever comes first.
RunLength run_length(const Recipe& recipe);

// floor(a * b / c) and ceil(a * b / c) without overflow (token counts times ramp steps pass
// 2^63 for long runs).
int64_t mul_div_floor(int64_t a, int64_t b, int64_t c);
int64_t mul_div_ceil(int64_t a, int64_t b, int64_t c);

}  // namespace mtnlg
