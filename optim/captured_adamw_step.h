// AdamW's step with nothing in it for the host to wait for, recorded once and replayed
// (Backend::capture: a CUDA graph on a GPU; the same calls on the CPU), for parallel.cuda_graph
// and mtnlg-bench-train --graph (issue #36 item 4: the optimizer inside the captured step).
//
// The host's step reads the gradient norm back, computes the clip and decides an fp16 skip
// before it launches the update, so the GPU idles in between. Here the gradients' summed squares
// (Backend::sum_squares_into), the clip (grad_clip_words) and the update (adamw_update_many_from)
// stay on the device and take the step's values from device words (AdamWStepWords): the host
// uploads the learning rate, the bias corrections and the loss scale before each replay (a copy
// in stream order, no wait) and reads the results after it, once: the summed squares (the norm),
// whether the update ran, and the step's loss. A step whose summed squares or loss is not
// finite updates nothing (weights, moments, step count), as the host's path skips an fp16
// overflow and stops on divergence before updating. The values are the host path's bit for bit
// (the same sums in the same order, kernels::grad_clip_words and adamw_coeffs_from).
//
// The first step runs the calls plainly, so the workspace a recording may not allocate exists by
// then. One rank's whole model with plain AdamW: a tensor group's, a pipeline's or ZeRO's norm
// sums over ranks on the host.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "core/replay_slot.h"
#include "model/param_registry.h"
#include "optim/adamw.h"

namespace mtnlg {

class CapturedAdamWStep {
 public:
  struct Result {
    double loss = 0.0;         // the loss tensor's value when the step ran
    double sum_squares = 0.0;  // of the gradients as they were (loss-scaled): norm = its sqrt
    bool updated = false;      // false: skipped (summed squares or loss not finite)
  };

  // adamw, params and backend are borrowed and outlive this.
  CapturedAdamWStep(AdamW& adamw, const ParamRegistry& params, Backend& backend);

  // Queues one step (no wait): its learning rate, the loss scale the gradients carry (1 without
  // one), and the step's summed loss on the device (LossSum::device_total; f64 [1]). True where
  // it recorded first (the caller may log it).
  bool queue(double lr, double loss_scale, const Tensor& loss);
  // Waits for the queued step and reads its words; counts the step in adamw when it updated.
  Result finish();

  // A stale recording (CapturedWork::stale: the workspace it holds moved, or an evaluation
  // called Backend::invalidate_recordings) is dropped: that step runs plainly, the next records.
  int64_t recordings() const { return slot_.recordings(); }
  // The launches the recording replays as one (CapturedWork::launches; -1 on the CPU).
  int64_t launches() const { return slot_.launches(); }

 private:
  AdamW& adamw_;
  Backend& backend_;
  std::vector<Tensor> grads_;   // the norm's: tensor-sharded first, then replicated
  int64_t first_ = 0;           // how many are sharded
  Tensor sums_;                 // f64 [grads_.size()]
  Tensor words_;                // f64 [AdamWStepWords::kCount]
  ReplaySlot slot_;             // plain first, then recorded and replayed; dropped when stale
  const void* loss_ = nullptr;  // the recording's key: the loss tensor's storage
  bool queued_ = false;
};

}  // namespace mtnlg
