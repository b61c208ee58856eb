#include "optim/optimizer.h"

#include "optim/adamw.h"
#include "optim/zero_optimizer.h"

namespace mtnlg {

std::unique_ptr<Optimizer> make_optimizer(ParamRegistry& params, Backend& backend,
                                          const OptimizerConfig& config, GradSync* grads,
                                          Communicator* data, Communicator* tensor) {
  if (grads != nullptr && grads->mode() == GradSync::Mode::kReduceScatter) {
    MTNLG_CHECK(data != nullptr);
    return std::make_unique<ZeroAdamW>(params, backend, config, *grads, *data, tensor);
  }
  return std::make_unique<AdamW>(params, backend, config, tensor);
}

}  // namespace mtnlg
