// GradSync: averages parameter gradients over the data-parallel group, in buckets.
//
// Each rank computed its gradient on 1/dp of the global batch, already scaled by
// 1 / (tokens of the whole global batch), so the data-parallel gradient is the SUM of the ranks'
// gradients. Gradients are packed into buckets of about `bucket_bytes` in reverse registration
// order (the order backward finishes them: last layers first, as Megatron-LM's and PyTorch DDP's
// buckets), each bucket all-reduced with one collective, then unpacked. Bucket boundaries
// depend only on the parameter list, so every rank issues the same collectives in the same
// order. Overlapping the buckets with backward needs an asynchronous communicator (later).
// Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "core/backend.h"
#include "parallel/communicator.h"

namespace mtnlg {

class GradSync {
 public:
  static constexpr int64_t kDefaultBucketBytes = 25 << 20;

  // grads: every gradient tensor, in parameter registration order (handles; the storage stays
  // the caller's). data may be a one-rank group (then sync() returns at once).
  GradSync(std::vector<Tensor> grads, Communicator& data,
           int64_t bucket_bytes = kDefaultBucketBytes);

  // Sums every gradient over the data-parallel group, in place.
  void sync(Backend& backend);

  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<Tensor> grads;
    int64_t numel = 0;
  };
  Communicator& data_;
  std::vector<Bucket> buckets_;
  Tensor flat_;  // host staging buffer, the size of the largest bucket
};

}  // namespace mtnlg
