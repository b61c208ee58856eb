// Launch helpers shared by the CUDA kernels in core/cuda/: grid sizing for grid-stride loops and
// dispatch from a runtime DType to a compile-time element type. Header-only, stateless.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace mtnlg {

constexpr int kCudaBlock = 256;

// Blocks for a grid-stride loop over n elements. Capped because a grid-stride loop needs no
// more than a few waves to fill any current GPU, and the cap keeps the count in range.
inline unsigned cuda_grid(int64_t n) {
  const int64_t blocks = (n + kCudaBlock - 1) / kCudaBlock;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, 65536));
}

// Calls f(T{}) with T = float or double for the tensor's floating dtype.
template <typename F>
void dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::kF32:
      f(float{});
      return;
    case DType::kF64:
      f(double{});
      return;
    default:
      throw unsupported(std::string(op) + " on CUDA supports f32 and f64, not " +
                        dtype_name(dtype) + "; mixed precision comes with the precision issue");
  }
}

}  // namespace mtnlg
