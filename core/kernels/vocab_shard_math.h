// Vocab-parallel index and gradient math, shared by the CPU kernels (core/cpu/) and the CUDA
// ones, so the CPU tests cover what the GPU runs. A rank holds rows (embedding) or columns
// (logits) [start, start + count) of the padded vocabulary; global ids at or beyond `vocab` are
// padding. Pure functions: thread-safe.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hostdevice.h"

namespace mtnlg::kernels {

// The local index of global row `id` on a rank holding [start, start + count), or -1 when
// another rank holds it.
MTNLG_HD int64_t shard_index(int64_t id, int64_t start, int64_t count) {
  const int64_t local = id - start;
  return 0 <= local && local < count ? local : -1;
}

// How many of a shard's `count` columns, starting at global column `start`, are real vocabulary
// (the first ones; the rest are padding).
MTNLG_HD int64_t shard_real_columns(int64_t start, int64_t count, int64_t vocab) {
  const int64_t real = vocab - start;
  return real < 0 ? 0 : (real < count ? real : count);
}

// The cross-entropy gradient of one real logit x of a row with global max mx and sum of
// exp(x - mx) `sum`: grad_scale * (softmax - 1 for the target), in double as the loss's
// statistics are.
MTNLG_HD double vocab_ce_grad(double x, double mx, double sum, bool is_target, double grad_scale) {
  using std::exp;
  double g = exp(x - mx) / sum;
  if (is_target) g -= 1.0;
  return grad_scale * g;
}

}  // namespace mtnlg::kernels
