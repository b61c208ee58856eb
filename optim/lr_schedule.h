// Learning-rate schedule counted in tokens, as the paper states it: linear warmup from 0 to lr
// over warmup_tokens, then cosine, linear or constant decay to min_lr at decay_tokens, min_lr
// after. The rate of an iteration is the schedule at the tokens consumed once that iteration's
// batch is counted, so the first iteration of a warmup already moves the weights.
#pragma once

#include <cstdint>

#include "core/config/recipe.h"

namespace mtnlg {

class LrSchedule {
 public:
  LrSchedule(const OptimizerConfig& opt, const ScheduleConfig& schedule);
  double lr_at(int64_t tokens) const;

 private:
  double max_lr_, min_lr_;
  int64_t warmup_, decay_;
  DecayStyle style_;
};

}  // namespace mtnlg
