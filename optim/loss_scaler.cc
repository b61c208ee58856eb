#include "optim/loss_scaler.h"

#include <algorithm>

#include "core/status.h"

namespace mtnlg {

namespace {
constexpr double kGrowthFactor = 2.0;   // Megatron's
constexpr double kBackoffFactor = 0.5;  // Megatron's
}  // namespace

LossScaler::LossScaler(const OptimizerConfig& config)
    : dynamic_(config.loss_scale == 0.0),
      min_scale_(config.min_loss_scale),
      window_(config.loss_scale_window),
      hysteresis_(config.hysteresis) {
  MTNLG_CHECK(config.loss_scale >= 0.0 && config.initial_loss_scale > 0.0 && window_ >= 1 &&
              hysteresis_ >= 1 && min_scale_ > 0.0);
  state_.scale = dynamic_ ? config.initial_loss_scale : config.loss_scale;
  state_.hysteresis_tracker = hysteresis_;
}

void LossScaler::update(bool found_inf) {
  if (!dynamic_) return;
  if (found_inf) {
    state_.growth_tracker = 0;
    --state_.hysteresis_tracker;
    if (state_.hysteresis_tracker <= 0)
      state_.scale = std::max(state_.scale * kBackoffFactor, min_scale_);
    return;
  }
  if (++state_.growth_tracker == window_) {
    state_.growth_tracker = 0;
    state_.hysteresis_tracker = hysteresis_;
    state_.scale *= kGrowthFactor;
  }
}

void LossScaler::load(const State& state) {
  MTNLG_CHECK_MSG(
      state.scale > 0.0 && state.growth_tracker >= 0,
      "loss scaler state: scale " << state.scale << ", growth tracker " << state.growth_tracker);
  state_ = state;
}

}  // namespace mtnlg
