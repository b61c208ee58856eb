// LossScaler: fp16 loss scaling with Megatron-LM's semantics (megatron/core/optimizer/
// grad_scaler.py). The loss (so every gradient) is multiplied by scale() before backward and the
// gradients by 1 / scale() before the update; an iteration whose gradients hold an inf or NaN on
// any rank (the caller agrees it over every rank) skips the update, and update(true) records it.
//
// Dynamic (optimizer.loss_scale 0): starts at initial_loss_scale. An overflow resets the growth
// count and takes one from the hysteresis count; when that reaches 0 the scale halves (not below
// min_loss_scale), and it halves again at each further overflow until loss_scale_window clean
// iterations in a row double the scale and restore the hysteresis count. Static (loss_scale > 0):
// the scale never changes; overflowing iterations are still skipped.
//
// Its state (scale and the two counts) goes into checkpoints so that a resumed run scales as
// the uninterrupted one. Not thread-safe.
#pragma once

#include <cstdint>

#include "core/config/recipe.h"

namespace mtnlg {

class LossScaler {
 public:
  struct State {
    double scale = 1.0;
    int64_t growth_tracker = 0;
    int64_t hysteresis_tracker = 0;
    bool operator==(const State&) const = default;
  };

  explicit LossScaler(const OptimizerConfig& config);

  double scale() const { return state_.scale; }
  bool dynamic() const { return dynamic_; }
  // After each iteration: whether its gradients overflowed (on any rank).
  void update(bool found_inf);

  const State& state() const { return state_; }
  // Restores a checkpoint's state (fails an MTNLG_CHECK on a non-positive scale or counts).
  void load(const State& state);

 private:
  bool dynamic_;
  double min_scale_;
  int64_t window_, hysteresis_;
  State state_;
};

}  // namespace mtnlg
