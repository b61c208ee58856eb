#include "model/linear.h"

#include "parallel/mappings.h"

namespace mtnlg {

void linear_forward(Backend& be, Tensor y, const Tensor& x, const Param& w, const Param& b) {
  be.linear_bias_forward(y, x, w.value, b.value, nullptr, Activation::kGelu);
}

void row_parallel_linear_forward(Backend& be, Tensor y, const Tensor& x, const Param& w,
                                 const Param& b, Communicator* tensor) {
  // One tensor rank: nothing to reduce, so the bias can go with the GEMM (a fused epilogue).
  if (tensor == nullptr || tensor->size() == 1) return linear_forward(be, y, x, w, b);
  Tensor y2 = y.as_2d();
  be.gemm_weight(y2, x.as_2d(), w.value, true, 1.0, 0.0);
  reduce_from_tensor_region_forward(be, y2, tensor);
  be.add_bias(y2, b.value);  // after the reduction: the replicated bias counts once
}

void linear_backward(Backend& be, Tensor dx, const Tensor& dy, const Tensor& x, Param& w,
                     Param* b) {
  const Tensor dy2 = dy.as_2d();
  if (dx.defined()) {
    Tensor dx2 = dx.as_2d();
    be.gemm_weight(dx2, dy2, w.value, false, 1.0, 0.0);
  }
  be.gemm(w.grad, dy2, true, x.as_2d(), false, 1.0, 1.0);
  if (b != nullptr) be.bias_backward(b->grad, dy2);
}

}  // namespace mtnlg
