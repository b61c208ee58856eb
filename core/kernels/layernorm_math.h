// LayerNorm's per-element and per-row math, shared by the CPU kernels (core/cpu/layernorm_cpu.cc)
// and the CUDA ones (core/cuda/layernorm_cuda.cu), so the CPU tests cover the arithmetic the GPU
// runs; the devices differ only in how a row's sums are formed (OpenMP simd reductions, warp
// sums). A is the accumulation type (acc_t<T>: float for bf16/fp16 rows). Pure: thread-safe.
//
// Forward, per row of c elements x: mean m = sum(x) / c; rstd s = 1 / sqrt(sum((x - m)^2) / c +
// eps) (two passes: no cancellation when |mean| >> std); y = (x - m) s w + b.
// Backward, with dnorm = w dy: dx += (dnorm - mean(dnorm) - norm mean(dnorm norm)) s, where
// norm = (x - m) s; dw += dy norm and db += dy, summed over rows.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hostdevice.h"

namespace mtnlg::kernels {

// The row's rstd from its sum of squared deviations.
template <typename A>
MTNLG_HD A layernorm_rstd(A squares, int64_t c, A eps) {
  using std::sqrt;
  return A(1) / sqrt(squares / static_cast<A>(c) + eps);
}

template <typename A>
MTNLG_HD A layernorm_out(A x, A m, A s, A w, A b) {
  return (x - m) * s * w + b;
}

// The backward row sums' terms of one element: dnorm and dnorm * norm.
template <typename A>
MTNLG_HD A layernorm_dnorm(A w, A dy) {
  return w * dy;
}
template <typename A>
MTNLG_HD A layernorm_dnorm_norm(A dnorm, A x, A m, A s) {
  return dnorm * (x - m) * s;
}

// The input gradient of one element, from the row's mean(dnorm) and mean(dnorm * norm).
template <typename A>
MTNLG_HD A layernorm_dx(A x, A dy, A w, A m, A s, A dnorm_mean, A dnorm_norm_mean) {
  const A norm = (x - m) * s;
  return (w * dy - dnorm_mean - norm * dnorm_norm_mean) * s;
}

// The weight gradient's term of one element (the bias gradient's is dy itself).
template <typename A>
MTNLG_HD A layernorm_dw(A dy, A x, A m, A s) {
  return dy * (x - m) * s;
}

}  // namespace mtnlg::kernels
