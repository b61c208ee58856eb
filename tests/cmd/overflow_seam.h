// The fp16 overflow a test forces through the Trainer's seam (cmd/trainer.h TrainerHooks): at
// `iteration`, rank `rank` puts an inf into its gradients after they are zeroed. Gradients
// accumulate into the buffer, so the inf survives backward and the reductions, and every rank
// sees a non-finite norm.
#pragma once

#include <cstdint>
#include <limits>

#include "cmd/trainer.h"

namespace mtnlg::test {

inline TrainerHooks overflow_at(int64_t iteration, int64_t rank = 0) {
  TrainerHooks hooks;
  hooks.before_backward = [iteration, rank](const StepSeam& s) {
    if (s.iteration != iteration || s.global_rank != rank) return;
    Tensor g = s.params.grad_buffer().slice(0, 1);
    s.backend.fill(g, std::numeric_limits<double>::infinity());
  };
  return hooks;
}

}  // namespace mtnlg::test
