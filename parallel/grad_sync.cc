#include "parallel/grad_sync.h"

#include <algorithm>
#include <cstring>

namespace mtnlg {

GradSync::GradSync(std::vector<Tensor> grads, Communicator& data, int64_t bucket_bytes)
    : data_(data) {
  int64_t largest = 0;
  DType dtype = DType::kF32;
  Bucket current;
  for (auto it = grads.rbegin(); it != grads.rend(); ++it) {
    const int64_t n = it->numel();
    MTNLG_CHECK(it == grads.rbegin() || it->dtype() == dtype);
    dtype = it->dtype();
    current.grads.push_back(*it);
    current.numel += n;
    if (current.numel * static_cast<int64_t>(dtype_size(dtype)) >= bucket_bytes) {
      largest = std::max(largest, current.numel);
      buckets_.push_back(std::move(current));
      current = Bucket();
    }
  }
  if (!current.grads.empty()) {
    largest = std::max(largest, current.numel);
    buckets_.push_back(std::move(current));
  }
  if (data_.size() > 1) flat_ = Tensor::cpu({largest}, dtype);
}

void GradSync::sync(Backend& backend) {
  if (data_.size() == 1) return;
  backend.synchronize();
  for (const Bucket& bucket : buckets_) {
    Tensor flat = flat_.slice(0, bucket.numel);
    // Pack (a device backend copies to the host buffer), reduce, unpack.
    int64_t offset = 0;
    for (const Tensor& grad : bucket.grads) {
      const int64_t n = grad.numel();
      Tensor dst = flat.slice(offset, offset + n).view(grad.shape());
      backend.copy(dst, grad);
      offset += n;
    }
    data_.all_reduce(flat, ReduceOp::kSum);
    offset = 0;
    for (const Tensor& grad : bucket.grads) {
      const int64_t n = grad.numel();
      Tensor dst = grad;
      backend.copy(dst, flat.slice(offset, offset + n).view(grad.shape()));
      offset += n;
    }
  }
}

}  // namespace mtnlg
