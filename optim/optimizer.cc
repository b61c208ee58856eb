#include "optim/optimizer.h"

#include "optim/adamw.h"
#include "optim/zero_optimizer.h"

namespace mtnlg {

std::unique_ptr<Optimizer> make_optimizer(ParamRegistry& params, Backend& backend,
                                          const OptimizerConfig& config, int64_t zero_stage,
                                          Communicator* data, Communicator* tensor) {
  if (zero_stage == 1 && data != nullptr && data->size() > 1)
    return std::make_unique<ZeroAdamW>(params, backend, config, *data, tensor);
  return std::make_unique<AdamW>(params, backend, config, tensor);
}

}  // namespace mtnlg
