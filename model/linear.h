// A dense layer y = x W^T + b on [n, in] rows, W [out, in]. Tensor-parallel column/row
// variants wrap these two calls with the mappings of parallel/ (3D-parallelism issue).
#pragma once

#include "core/backend.h"
#include "model/param_registry.h"

namespace mtnlg {

// y: [.., out]; x: [.., in]
void linear_forward(Backend& be, Tensor y, const Tensor& x, const Param& w, const Param& b);
// dx (overwritten, skipped when undefined): [.., in]; w.grad += dy^T x; b.grad += sum dy
void linear_backward(Backend& be, Tensor dx, const Tensor& dy, const Tensor& x, Param& w,
                     Param& b);

}  // namespace mtnlg
