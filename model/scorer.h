// Scorer: what mtnlg-eval's tasks need of a model, the log-likelihoods of many token sequences
// after their prefixes (lm-evaluation-harness's loglikelihood requests). Two implementations:
// GPTScorer (model/gpt_scorer.h: a whole float32 model on the CPU, requests packed row by row
// with their own attention spans, the fastest in one process) and StageScorer
// (cmd/stage_scorer.h: the training forward on any backend, precision and tensor x pipeline x
// data layout). Both score a request as one forward over prefix + target would.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace mtnlg {

struct ScoreGroup {
  std::vector<int32_t> prefix;                // at positions [0, L), L >= 1
  std::vector<std::vector<int32_t>> targets;  // each at least one token, read after the prefix
};

struct TargetScore {
  double logprob = 0;   // the sum of the target tokens' log-probabilities
  bool greedy = false;  // every target token the most probable one (the first on ties)
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  // The longest prefix + target - 1 a request may have: the model's window.
  virtual int64_t max_positions() const = 0;
  // Token rows run through the layers so far (padding included where the scorer pads).
  virtual int64_t tokens_run() const = 0;
  // result[g][t]: target t of group g; `progress(groups_done)` now and then. Collective where
  // the scorer spans ranks: every rank passes the same groups and gets every score. Throws
  // invalid_argument for an empty prefix or target, a prefix + target longer than the window, or
  // a token outside the vocabulary.
  virtual std::vector<std::vector<TargetScore>> score(
      std::span<const ScoreGroup> groups, const std::function<void(int64_t)>& progress = {}) = 0;
};

}  // namespace mtnlg
