// A step's summed token loss, kept where the backend computes it: the micro-batches add into a
// double on the device (Backend::cross_entropy_forward_add), and the host reads it once, when the
// step needs it, instead of waiting for the GPU at every micro-batch. The vocab-parallel loss,
// which its all-reduces already bring to the host, adds there. One run takes one of the two
// paths, so the sum has the bits of the micro-batches' losses added in order on the host.
#pragma once

#include "core/backend.h"
#include "core/tensor.h"

namespace mtnlg {

class LossSum {
 public:
  explicit LossSum(Backend& be) : total_(be.alloc({1}, DType::kF64)) {}  // alloc zeroes

  Tensor& device_total() { return total_; }
  void add_on_host(double loss) { host_ += loss; }
  // The sum so far, then zero again. Waits for the backend (one 8-byte read).
  double take(Backend& be);
  // take() where the device's total was already read (`device_value`: a captured optimizer step
  // reads it with its words): the sum, then zero again (no wait).
  double take_read(Backend& be, double device_value);

 private:
  Tensor total_;
  double host_ = 0.0;
};

}  // namespace mtnlg
