// GPTScorer: the log-likelihoods of many token sequences after their prefixes, many sequences to
// a forward (lm-evaluation-harness's batched loglikelihood requests, on the CPU).
//
// Sequences are packed as rows of one batch, each row attending only to the keys of its own
// sequence, so one forward's GEMMs cover many short requests (a request alone gives GEMMs of a
// few rows, bound by packing the weights rather than by arithmetic). A group is a prefix and the
// targets scored after it: the prefix is run once, each target's rows attend to the prefix and
// to their own earlier rows (the few choices of a multiple-choice document share its context
// that way), and the prefix's last row, which predicts every target's first token, is scored
// once. A prefix's attention is the backend's causal kernel (the training forward's); the targets'
// few rows attend here. Numerics: each target's log-likelihood equals that of one forward over
// prefix + target (GPTDecoder, or the training forward) to float32 rounding
// (model_gpt_scorer_test).
//
// Needs a whole f32 model on the CPU (invalid_argument otherwise). Borrows the model; not
// thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/row_forward.h"
#include "model/scorer.h"

namespace mtnlg {

class GPTScorer : public Scorer {
 public:
  // max_rows: the rows one packed forward holds (at least the model's positions, so any
  // sequence that fits the model fits a batch).
  GPTScorer(GPTStage& model, int64_t max_rows);

  int64_t max_rows() const { return rows_.max_rows(); }
  int64_t max_positions() const override { return rows_.config().max_positions; }
  int64_t tokens_run() const override { return tokens_run_; }  // rows run through the layers

  // The rows a group takes: its prefix and each target but its last token.
  static int64_t rows(const ScoreGroup& g);

  // result[g][t]: target t of group g. Groups go to forwards in order, as many to one as fit
  // max_rows (a group larger than that goes as its targets one by one, each after the prefix);
  // `progress(groups_done)` after each forward. Throws invalid_argument for an empty prefix or
  // target, a prefix + target longer than the model's positions, or a token outside the
  // vocabulary.
  std::vector<std::vector<TargetScore>> score(
      std::span<const ScoreGroup> groups,
      const std::function<void(int64_t)>& progress = {}) override;

 private:
  void forward(std::span<const ScoreGroup> batch, std::vector<std::vector<TargetScore>>* out);
  // Each group's prefix: causal attention by the backend's kernel (the training forward's); the
  // targets' rows, a few each: their prefix's keys and their own, here.
  void attend(std::span<const ScoreGroup> batch, const Tensor& qkv, Tensor& out);

  RowForward rows_;
  int64_t tokens_run_ = 0;
  // Per packed row: it attends to keys [span_begin, span_end) (its prefix, for a target's row)
  // and [own_begin, row] (its own sequence so far).
  std::vector<int64_t> span_begin_, span_end_, own_begin_;
  std::vector<int64_t> starts_;  // per group of the batch: its first row
  std::vector<float> gathered_;  // the scored rows, contiguous for the head
  Tensor stats_;                 // the attention kernel's per-row statistics (unused after)
};

}  // namespace mtnlg
