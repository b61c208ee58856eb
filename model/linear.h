// A dense layer y = x W^T + b on [n, in] rows, W [out, in], and its tensor-parallel forms
// (Megatron-LM's ColumnParallelLinear / RowParallelLinear):
// - column-parallel: W split along dim 0 (out/tp rows, bias split too): linear_forward on the
//   replicated input, then linear_backward and copy_to_tensor_region_backward on dx;
// - row-parallel: W split along dim 1 (in/tp columns), bias replicated:
//   row_parallel_linear_forward (partial product, all-reduce, then the bias), and plain
//   linear_backward (dy is replicated, so dx is this rank's [.., in/tp] slice).
#pragma once

#include "core/backend.h"
#include "model/param_registry.h"
#include "parallel/communicator.h"

namespace mtnlg {

// y: [.., out]; x: [.., in]
void linear_forward(Backend& be, Tensor y, const Tensor& x, const Param& w, const Param& b);
// y: [.., out] = all-reduce over `tensor` of x W_local^T, then + b; x: [.., in/tp].
void row_parallel_linear_forward(Backend& be, Tensor y, const Tensor& x, const Param& w,
                                 const Param& b, Communicator* tensor);
// dx (overwritten, skipped when undefined): [.., in]; w.grad += dy^T x; b->grad += sum dy (b
// null: the caller has summed it already, e.g. with Backend::gelu_bias_backward)
void linear_backward(Backend& be, Tensor dx, const Tensor& dy, const Tensor& x, Param& w, Param* b);

}  // namespace mtnlg
