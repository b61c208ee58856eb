#include "optim/batch_ramp.h"

#include <algorithm>
#include <limits>

namespace mtnlg {

int64_t mul_div_floor(int64_t a, int64_t b, int64_t c) {
  return static_cast<int64_t>(static_cast<__int128>(a) * b / c);
}

int64_t mul_div_ceil(int64_t a, int64_t b, int64_t c) {
  return static_cast<int64_t>((static_cast<__int128>(a) * b + c - 1) / c);
}

int64_t ramp_global_batch(const BatchConfig& batch, int64_t consumed_tokens) {
  const RampupConfig& ramp = batch.rampup;
  if (ramp.start <= 0 || consumed_tokens > ramp.tokens) return batch.global_batch_size;
  const int64_t steps = (batch.global_batch_size - ramp.start) / ramp.increment;
  const int64_t step = std::min(steps, mul_div_floor(consumed_tokens, steps, ramp.tokens));
  return ramp.start + step * ramp.increment;
}

RunLength run_length(const Recipe& r) {
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  const int64_t seq = r.model.seq_length, global = r.batch.global_batch_size;
  const int64_t max_iters = r.schedule.train_iters > 0 ? r.schedule.train_iters : kNever;
  const int64_t end_tokens = r.schedule.train_tokens > 0 ? r.schedule.train_tokens : kNever;
  RunLength run;
  // The ramp, one iteration at a time (at most rampup.tokens / (start * seq) of them).
  while (run.iterations < max_iters && run.tokens < end_tokens) {
    const int64_t b = ramp_global_batch(r.batch, run.tokens);
    if (b == global) break;
    run.tokens += b * seq;
    ++run.iterations;
  }
  // The full batch, in closed form.
  if (run.iterations < max_iters && run.tokens < end_tokens) {
    const int64_t per_iter = global * seq;
    int64_t left = max_iters - run.iterations;
    if (end_tokens != kNever)
      left = std::min(left, mul_div_ceil(end_tokens - run.tokens, 1, per_iter));
    run.iterations += left;
    run.tokens += left * per_iter;
  }
  return run;
}

std::function<int64_t(int64_t)> global_batch_by_samples(const BatchConfig& batch,
                                                        int64_t seq_length) {
  return [batch, seq_length](int64_t consumed_samples) {
    return ramp_global_batch(batch, consumed_samples * seq_length);
  };
}

}  // namespace mtnlg
