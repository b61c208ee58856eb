// Optimizer: what the trainer asks of an optimizer, whichever keeps the state: AdamW (all of it,
// optim/adamw.h) or ZeroAdamW (this data-parallel rank's partition, optim/zero_optimizer.h).
// One iteration: reduce_gradients() (the global norm, for clipping), then step(). Checkpoints
// see the state as StateTensors named and boxed by parameter, whatever the partition.
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

namespace mtnlg {

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Makes the gradients this rank updates final and returns the global gradient norm: AdamW's
  // were summed by GradSync already; ZeroAdamW reduce-scatters them over the data group.
  // Collective (tensor group; ZeroAdamW also the data group). Tensor-parallel shards count
  // over the tensor group, replicated parameters and tied copies once.
  virtual double reduce_gradients() = 0;
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

// ZeroAdamW when zero_stage is 1 and the data group has more than one rank, else AdamW. data and
// tensor: the groups (borrowed; null for one process).
std::unique_ptr<Optimizer> make_optimizer(ParamRegistry& params, Backend& backend,
                                          const OptimizerConfig& config, int64_t zero_stage,
                                          Communicator* data, Communicator* tensor);

}  // namespace mtnlg
