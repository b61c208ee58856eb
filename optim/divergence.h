// The divergence check of a training step: a non-finite loss, or a non-finite gradient norm that
// is not an fp16 overflow (the loss scaler skips those), stops the run with an error naming the
// recipe key to change. Before any update (iteration 1) the starting weights are at fault, not
// the learning rate, and the message names where they came from.
#pragma once

#include <cstdint>

namespace mtnlg {

// Where a run's starting weights came from.
enum class WeightsSource { kInit, kInitFrom, kCheckpoint };

struct StepHealth {
  double loss = 0.0;
  double grad_norm = 0.0;  // unscaled
  bool overflow = false;   // an fp16 overflow, skipped by the loss scaler
  int64_t iteration = 0;   // the step's, 1-based
};

// Throws Error (Code::kDiverged) naming model.init_method_std (with its value),
// model.init_from or checkpoint.load for a first iteration, else optimizer.lr.
void check_step_finite(const StepHealth& step, WeightsSource source, double init_method_std);

}  // namespace mtnlg
