// Optimizer: what the trainer asks of an optimizer, whichever keeps the state: AdamW (all of it,
// optim/adamw.h) or ZeroAdamW (this data-parallel rank's partition, optim/zero_optimizer.h).
// One iteration, after GradSync has reduced the gradients (parallel/grad_sync.h: all-reduced
// for AdamW, reduce-scattered for ZeroAdamW): grad_norm() (for clipping), then step().
// Checkpoints see the state as StateTensors named and boxed by parameter, whatever the partition.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/config/recipe.h"
#include "core/state_tensor.h"
#include "model/param_registry.h"
#include "parallel/communicator.h"
#include "parallel/grad_sync.h"

namespace mtnlg {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // The global norm of the reduced gradients. Collective (tensor group; ZeroAdamW also the data
  // group). Tensor-parallel shards count over the tensor group, replicated parameters and tied
  // parameters once.
  virtual double grad_norm() = 0;
  // One update with learning rate lr, the gradients multiplied by grad_scale (the clip
  // coefficient) first. Increments steps().
  virtual void step(double lr, double grad_scale) = 0;

  virtual int64_t steps() const = 0;
  virtual void set_steps(int64_t steps) = 0;
  // Bytes of optimizer state on this rank.
  virtual int64_t state_bytes() const = 0;
  // The state as checkpoint tensors (core/state_tensor.h).
  virtual std::vector<StateTensor> state() const = 0;
  // Whether each data-parallel rank holds its own part of the state (each saves it), or every
  // rank the same (data rank 0 saves it).
  virtual bool partitioned() const = 0;
  // For the log: "AdamW" or "AdamW with ZeRO-1 over 4 data ranks".
  virtual std::string describe() const = 0;
};

// ZeroAdamW when `grads` reduce-scatters (GradSync::Mode::kReduceScatter, over `data`), else
// AdamW. grads, data and tensor: borrowed; null for one process.
std::unique_ptr<Optimizer> make_optimizer(ParamRegistry& params, Backend& backend,
                                          const OptimizerConfig& config, GradSync* grads,
                                          Communicator* data, Communicator* tensor);

}  // namespace mtnlg
