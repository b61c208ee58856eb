#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mtnlg {

LrSchedule::LrSchedule(const OptimizerConfig& opt, const ScheduleConfig& s)
    : max_lr_(opt.lr),
      min_lr_(opt.min_lr),
      warmup_(s.warmup_tokens),
      decay_(s.decay_tokens),
      style_(s.decay_style) {}

double LrSchedule::lr_at(int64_t tokens) const {
  if (warmup_ > 0 && tokens <= warmup_)
    return max_lr_ * static_cast<double>(tokens) / static_cast<double>(warmup_);
  if (style_ == DecayStyle::kConstant) return max_lr_;
  if (tokens >= decay_) return min_lr_;
  const double ratio = static_cast<double>(tokens - warmup_) /
                       static_cast<double>(std::max<int64_t>(1, decay_ - warmup_));
  const double coeff = style_ == DecayStyle::kCosine
                           ? 0.5 * (std::cos(std::numbers::pi * ratio) + 1.0)
                           : 1.0 - ratio;
  return min_lr_ + (max_lr_ - min_lr_) * coeff;
}

}  // namespace mtnlg
