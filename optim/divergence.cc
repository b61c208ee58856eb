#include "optim/divergence.h"

#include <cmath>
#include <string>

#include "core/metrics.h"
#include "core/status.h"

namespace mtnlg {

void check_step_finite(const StepHealth& s, WeightsSource source, double init_method_std) {
  if (std::isfinite(s.loss) && (std::isfinite(s.grad_norm) || s.overflow)) return;
  if (s.iteration == 1) {
    // Nothing has been updated yet: the starting weights are at fault, not the learning rate.
    const std::string key = source == WeightsSource::kCheckpoint ? "checkpoint.load"
                            : source == WeightsSource::kInitFrom ? "model.init_from"
                                                                 : "model.init_method_std";
    throw Error(
        Code::kDiverged,
        "the first iteration's loss is " + json_number(s.loss) + " and grad norm " +
            json_number(s.grad_norm) + " before any update: the starting weights are at fault; " +
            (source == WeightsSource::kInit ? "lower model.init_method_std (" +
                                                  json_number(init_method_std) + "; 0.02 is usual)"
                                            : "check the weights in " + key),
        key);
  }
  throw Error(Code::kDiverged,
              "training diverged at iteration " + std::to_string(s.iteration) + " (loss " +
                  json_number(s.loss) + ", grad norm " + json_number(s.grad_norm) +
                  "): lower optimizer.lr, lengthen schedule.warmup_tokens or set "
                  "optimizer.clip_grad",
              "optimizer.lr");
}

}  // namespace mtnlg
