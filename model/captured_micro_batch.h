// One stage's micro-batch, forward and backward, recorded once and replayed (Backend::capture:
// a CUDA graph on a GPU, one launch for the micro-batch's kernels; the same calls on the CPU):
// the trainer's parallel.cuda_graph and mtnlg-bench-train --graph. Before each replay the
// micro-batch's ids go into the activations' own buffers (the recorded forward reads them where
// they are) and dropout's streams move to the micro-batch's (Backend::set_rng_stream_base: the
// work is recorded as micro-batch 0, model/dropout_streams.h). What the host passes anew is part
// of the recording's key: the gradient scale (the batch ramp and fp16's loss scale change it) and
// the activations; a new key records again. The first micro-batch runs plainly, so that the
// buffers, plans and workspaces a recording may not allocate exist by then (core/replay_slot.h).
#pragma once

#include <cstdint>

#include "core/backend.h"
#include "core/replay_slot.h"
#include "model/gpt_stage.h"
#include "model/loss_sum.h"

namespace mtnlg {

class CapturedMicroBatch {
 public:
  CapturedMicroBatch(GPTStage& model, Backend& backend)
      : model_(model), backend_(backend), slot_(backend) {}

  // GPTStage::forward (into `loss`) then GPTStage::backward of one micro-batch on a stage that
  // is both first and last (tokens in, loss out), as the plain calls would with this
  // micro_batch_id: the same bits on the CPU. True where it recorded first (the trainer logs it).
  bool run(StageActivations& acts, const Tensor& tokens, const Tensor& targets,
           uint64_t micro_batch_id, double grad_scale, LossSum& loss);

  // A recording gone stale (CapturedWork::stale: the backend's workspace moved, or other work
  // called Backend::invalidate_recordings, as an evaluation does) is dropped: the next
  // micro-batch runs plainly again, then records anew.

  // Recordings made so far, and the launches the last one replays as one (CapturedWork::
  // launches: a CUDA graph's nodes; -1 on the CPU or before the first).
  int64_t recordings() const { return slot_.recordings(); }
  int64_t launches() const { return slot_.launches(); }

 private:
  GPTStage& model_;
  Backend& backend_;
  ReplaySlot slot_;  // plain first, then recorded and replayed; dropped when stale
  // The recording's key: what its calls took from the host.
  const StageActivations* acts_ = nullptr;
  const LossSum* loss_ = nullptr;
  double grad_scale_ = 0.0;
};

}  // namespace mtnlg
