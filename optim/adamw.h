// AdamW over a ParamRegistry, with global-norm gradient clipping.
//
// Moments live in the parameters' dtype (fp32 for training; fp64 in gradient tests). With bf16
// parameter values (mixed precision) the gradients are fp32 main gradients, and AdamW keeps fp32
// master weights beside fp32 moments: the update runs on the masters, and each value is then
// re-rounded to bf16 from its master (Megatron's Float16OptimizerWithFloat16Params; the masters
// start as the bf16 values, as Megatron's clone of them). Under ZeRO-1 each data-parallel rank
// holds only its partition (optim/zero_optimizer.h). Decoupled weight decay applies to every
// parameter whose spec is not no_decay (weight matrices and embeddings, as Megatron-LM). Not
// thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/backend.h"
#include "core/config/recipe.h"
#include "core/state_tensor.h"
#include "model/param_registry.h"
#include "optim/optimizer.h"
#include "parallel/communicator.h"

namespace mtnlg {

// sqrt(sum of squared gradients), accumulated in double. With tensor parallelism (a `tensor`
// group of more than one rank) the norm is the global model's: tensor-parallel shards
// (partition_dim >= 0) are summed over the group, replicated parameters (whose gradients are
// identical on every tensor rank) counted once. Collective over `tensor` then. A tied copy
// (Tied::kCopy: the last stage's word embeddings) is left out: its owner counts it.
double global_grad_norm(Backend& backend, const ParamRegistry& params,
                        Communicator* tensor = nullptr);
// The same split for squared sums already taken: sharded sum all-reduced over `tensor`, plus the
// replicated sum (returns the total, not its square root).
double tensor_parallel_sum_squares(double sharded, double replicated, Communicator* tensor);

// The factor that brings a gradient of norm `norm` within `max_norm` (1 when clipping is off,
// max_norm <= 0, or the norm is already within it).
double clip_coefficient(double norm, double max_norm);

// Checkpoint names of the two Adam moments of parameter `param`.
std::string exp_avg_name(const std::string& param);
std::string exp_avg_sq_name(const std::string& param);

class AdamW final : public Optimizer {
 public:
  // tensor: the tensor-parallel group for the norm (borrowed; null without tensor parallelism).
  AdamW(ParamRegistry& params, Backend& backend, const OptimizerConfig& config,
        Communicator* tensor = nullptr);

  // global_grad_norm of the gradients (GradSync has summed them over data ranks).
  double grad_norm() override;
  // One update with learning rate lr; the gradients are multiplied by grad_scale first
  // (the clip coefficient). Increments the step count used for bias correction.
  void step(double lr, double grad_scale) override;

  // The step's items for Backend::adamw_update_many (every parameter, in registry order) with
  // these values; step() passes them, a captured step (optim/captured_adamw_step.h) records them.
  std::vector<AdamWItem> items(double lr, double grad_scale, int64_t step);
  const OptimizerConfig& config() const { return config_; }
  // The tensor group the norm sums over (null: none).
  Communicator* tensor_group() const { return tensor_; }

  int64_t steps() const override { return step_; }
  // Moments, in registry order (checkpointing saves them).
  std::vector<Tensor>& exp_avg() { return m_; }
  std::vector<Tensor>& exp_avg_sq() { return v_; }
  void set_steps(int64_t steps) override { step_ = steps; }
  // Bytes of optimizer state (the two moments).
  int64_t state_bytes() const override;
  // The moments as checkpoint state (core/state_tensor.h): "exp_avg.NAME" and "exp_avg_sq.NAME",
  // shaped and sharded as parameter NAME, and with bf16 values the fp32 masters "master.NAME".
  // The step count is a scalar beside them (steps()).
  std::vector<StateTensor> state() const override;
  bool partitioned() const override { return false; }
  std::string describe() const override {
    return masters_.empty() ? "AdamW" : "AdamW with fp32 master weights";
  }
  // The fp32 master weights, in registry order (empty unless the values are bf16).
  const std::vector<Tensor>& masters() const { return masters_; }

 private:
  ParamRegistry& params_;
  Backend& backend_;
  OptimizerConfig config_;
  Communicator* tensor_;
  std::vector<Tensor> m_, v_;
  std::vector<Tensor> masters_;  // bf16 values only
  int64_t step_ = 0;
};

// Checkpoint name of parameter `param`'s fp32 master weight.
std::string master_name(const std::string& param);

}  // namespace mtnlg
