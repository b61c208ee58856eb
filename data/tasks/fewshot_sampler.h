// lm-evaluation-harness's few-shot sampler (lm_eval/api/samplers.py ContextSampler at 4e7e0d47):
// one Python `Random(seed)` a task (seed 1234, the harness's fewshot_seed), drawn from in the
// order the documents are evaluated, so each document's examples depend on every draw before it.
// For a document of the evaluated split, when the examples come from that same split, n + 1 are
// drawn, those equal to the document removed, and the first n kept; from another split, n are
// drawn. Equality is the caller's (the harness compares the documents' dicts).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "data/tasks/python_random.h"

namespace mtnlg::tasks {

class FewshotSampler {
 public:
  explicit FewshotSampler(uint64_t seed = 1234) : rnd_(seed) {}

  // n examples' indices into a pool of `pool_size` documents. equals_eval(i): whether pool
  // document i equals the evaluated one; empty when the pool is another split. Throws
  // invalid_argument when the pool is too small or removing the document leaves fewer than n
  // (the harness's assertion).
  std::vector<int64_t> sample(int64_t pool_size, int64_t n,
                              const std::function<bool(int64_t)>& equals_eval = {});

 private:
  PythonRandom rnd_;
};

}  // namespace mtnlg::tasks
