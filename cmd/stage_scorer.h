// StageScorer: lm-evaluation-harness's log-likelihood requests scored by the training forward
// (GPTStage), so on any backend (the CPU, a GPU), precision (fp32, bf16) and layout: this rank's
// stage of a tensor x pipeline split, as Megatron-LM evaluates a model that does not fit one
// device, with data-parallel replicas sharing the requests.
//
// Each request (a group's prefix and one target) is a row of prefix + target but its last token;
// rows are sorted longest first, as the harness sorts them, and cut into micro-batches of b rows
// of s positions (s: the longest row rounded up to a multiple of 16, or for a longer row of 1/8
// of the power of two above it, at most the window; b x s at most the token budget), padded
// after their end (causal attention: padding changes no earlier position).
// Micro-batch k goes to data-parallel replica k % dp; within a replica the micro-batches of one
// shape go through the pipeline together (parallel/pipeline_schedule.h forward_pipelining). The
// last stage scores its rows' target positions from the vocabulary-parallel logits
// (model/vocab_parallel.h vocab_parallel_token_scores); the scores are summed over the pipeline
// and data groups, so every rank returns every score.
//
// Numerics: in fp32 each score equals GPTScorer's to float32 rounding (both are one forward of
// prefix + target; the GEMMs' shapes differ). Borrows the model (in evaluation mode) and the
// groups; not thread-safe; collective over the model's tensor, pipeline and data groups.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/gpt_stage.h"
#include "model/scorer.h"
#include "parallel/communicator.h"
#include "parallel/p2p.h"

namespace mtnlg {

struct ScorerGroups {
  Communicator* tensor = nullptr;    // the stage's tensor group (null: tensor 1)
  Communicator* pipeline = nullptr;  // null: one stage holds the model
  Communicator* data = nullptr;      // null: one replica
};

class StageScorer : public Scorer {
 public:
  // budget: tokens a micro-batch holds, b x s (at least one window: the model's positions).
  StageScorer(GPTStage& model, const ScorerGroups& groups, int64_t budget);

  int64_t max_positions() const override { return model_.config().max_positions; }
  int64_t tokens_run() const override { return tokens_run_; }  // over every replica
  std::vector<std::vector<TargetScore>> score(
      std::span<const ScoreGroup> groups,
      const std::function<void(int64_t)>& progress = {}) override;

 private:
  GPTStage& model_;
  ScorerGroups groups_;
  P2PCommunicator p2p_;
  int64_t budget_;
  int64_t tokens_run_ = 0;
};

}  // namespace mtnlg
