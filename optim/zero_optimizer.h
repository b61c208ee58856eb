// ZeroAdamW: AdamW with ZeRO stage 1 over the data-parallel group: each rank keeps the Adam
// moments of, and updates, only its partition of the parameters.
//
// Every parameter is viewed, in registry order, as one flat vector of N elements, padded with
// zeros to a multiple of dp; rank r owns elements [r*S, (r+1)*S), S = padded / dp, so the moments
// per rank fall as 1/dp. One iteration:
//   GradSync::wait() (parallel/grad_sync.h, Mode::kReduceScatter): the gradient buffer summed
//     over the data group, this rank's partition of it kept (the one gradient path);
//   grad_norm(): the global grad norm (all-reduce of the partitions' sums of squares), equal to
//     the norm of the all-reduced gradient;
//   step(): AdamW on the partition (each segment with its parameter's weight decay: no_decay
//     parameters take none), then all-gather the updated partitions so every rank holds the full
//     parameters.
// With bf16 values (fp32 main gradients) the partition also keeps fp32 master weights: the update
// runs on them, the masters are all-gathered and every value is rounded from its master, as
// AdamW does on one rank. The elementwise update is the same kernel as AdamW's, so with the same
// summed gradient it gives bitwise the same parameters (and masters). The parameters' own .grad
// tensors are only read (they keep this rank's unreduced gradient).
//
// Ownership: borrows the registry, backend, GradSync and communicators (they must outlive it);
// owns the moments (backend memory); the all-gather of the updated parameters reuses GradSync's
// buffers (padded N + S, backend memory), whose reduced gradient step() has consumed by then.
// Not thread-safe; step() and grad_norm() are collective over the data group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/config/recipe.h"
#include "core/state_tensor.h"
#include "model/param_registry.h"
#include "optim/optimizer.h"
#include "parallel/communicator.h"
#include "parallel/grad_sync.h"

namespace mtnlg {

class ZeroAdamW final : public Optimizer {
 public:
  // grads: the registry's GradSync in Mode::kReduceScatter over `data` (its partition is the
  // reduced gradient this rank updates). tensor: the tensor-parallel group (borrowed; null
  // without tensor parallelism), for the norm.
  ZeroAdamW(ParamRegistry& params, Backend& backend, const OptimizerConfig& config, GradSync& grads,
            Communicator& data, Communicator* tensor = nullptr);

  // The global gradient norm of the reduced partitions (call after GradSync::wait; collective
  // over the data group, and the tensor group: shards summed there, replicated parameters counted
  // once, tied copies left out, as global_grad_norm).
  double grad_norm() override;
  // One AdamW update of the partition with learning rate lr and the gradient multiplied by
  // grad_scale (the clip coefficient), then the all-gather of the parameters (collective).
  // Call after grad_norm(). Increments the step count used for bias correction.
  void step(double lr, double grad_scale) override;

  int64_t steps() const override { return step_; }
  void set_steps(int64_t steps) override { step_ = steps; }
  int64_t numel() const { return numel_; }                    // N, without padding
  int64_t partition_begin() const { return begin_; }          // r * S
  int64_t partition_size() const { return partition_size_; }  // S (padding included)
  // Bytes of optimizer state on this rank (the two moments of the partition).
  int64_t state_bytes() const override;
  // The partition's moments, flat [S] (checkpointing saves them).
  Tensor& exp_avg() { return m_; }
  Tensor& exp_avg_sq() { return v_; }
  // The partition's moments as checkpoint state (core/state_tensor.h), one piece per parameter
  // the partition touches: "exp_avg.NAME" / "exp_avg_sq.NAME" holding elements
  // [in_param, in_param + length) of parameter NAME's shard, so a checkpoint is sliced per
  // parameter, never by this layout's flat buffer. The step count is a scalar (steps()).
  std::vector<StateTensor> state() const override;
  bool partitioned() const override { return true; }
  std::string describe() const override;

 private:
  // A run of the partition inside one parameter.
  struct Segment {
    size_t param = 0;      // registry index
    int64_t in_param = 0;  // first element, in the parameter's flat view
    int64_t in_part = 0;   // first element, in the partition
    int64_t length = 0;
    bool no_decay = false;
    bool sharded = false;  // a tensor-parallel shard (partition_dim >= 0)
  };

  ParamRegistry& params_;
  Backend& backend_;
  OptimizerConfig config_;
  GradSync& grads_;
  Communicator& data_;
  Communicator* tensor_;
  DType dtype_ = DType::kF32;
  int64_t numel_ = 0, partition_size_ = 0, begin_ = 0;
  std::vector<Segment> segments_;
  // All on the backend's device:
  Tensor flat_;       // [padded N]: the all-gather's target (GradSync's gradient buffer)
  Tensor part_;       // [S]: this rank's updated parameters, sent (GradSync's partition)
  Tensor part_grad_;  // [S]: the reduced gradient the update reads (the same partition)
  Tensor m_, v_;      // backend [S]
  Tensor masters_;    // backend [S] fp32, with bf16 values only
  int64_t step_ = 0;
};

}  // namespace mtnlg
