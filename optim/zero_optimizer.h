// ZeroAdamW: AdamW with ZeRO stage 1 over the data-parallel group: each rank keeps the Adam
// moments of, and updates, only its partition of the parameters.
//
// Every parameter is viewed, in registry order, as one flat vector of N elements, padded with
// zeros to a multiple of dp; rank r owns elements [r*S, (r+1)*S), S = padded / dp, so the moments
// per rank fall as 1/dp. One iteration:
//   reduce_gradients(): pack the gradients, reduce-scatter (sum) so this rank holds its
//     partition's summed gradient; returns the global grad norm (all-reduce of the partitions'
//     sums of squares), equal to the norm of the all-reduced gradient;
//   step(): AdamW on the partition (each segment with its parameter's weight decay: no_decay
//     parameters take none), then all-gather the updated partitions so every rank holds the full
//     parameters.
// The elementwise update is the same kernel as AdamW's, so with the same summed gradient it gives
// bitwise the same parameters. The parameters' own .grad tensors are only read (they keep this
// rank's unreduced gradient).
//
// Ownership: borrows the registry, backend and communicator (they must outlive it); owns the
// moments (backend memory) and flat host staging buffers (padded N + S elements).
// Not thread-safe; step() and reduce_gradients() are collective over the data group.
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

namespace mtnlg {

class ZeroAdamW final : public Optimizer {
 public:
  // tensor: the tensor-parallel group (borrowed; null without tensor parallelism), for the norm.
  ZeroAdamW(ParamRegistry& params, Backend& backend, const OptimizerConfig& config,
            Communicator& data, Communicator* tensor = nullptr);

  // Sums the gradients over the data group into this rank's partition; returns the global
  // gradient norm (collective; tensor-parallel shards summed over the tensor group, replicated
  // parameters counted once, as global_grad_norm; a tied copy left out of the norm, not out of
  // the reduction).
  double reduce_gradients() override;
  // One AdamW update of the partition with learning rate lr and the gradient multiplied by
  // grad_scale (the clip coefficient), then the all-gather of the parameters (collective).
  // Call after reduce_gradients(). Increments the step count used for bias correction.
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
  Communicator& data_;
  Communicator* tensor_;
  DType dtype_ = DType::kF32;
  int64_t numel_ = 0, partition_size_ = 0, begin_ = 0;
  std::vector<Segment> segments_;
  Tensor flat_;       // host [padded N]: gradients packed for the reduce-scatter, gather target
  Tensor part_;       // host [S]: the reduced gradient partition, then the parameters sent
  Tensor part_grad_;  // backend [S]: the reduced gradient where the kernel runs (== part_ on CPU)
  Tensor m_, v_;      // backend [S]
  int64_t step_ = 0;
};

}  // namespace mtnlg
