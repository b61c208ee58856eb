// GeLU per-element math, shared by the CPU kernels (core/cpu/gelu_cpu.cc) and the CUDA ones, so
// the CPU tests cover the arithmetic the GPU runs. Pure functions: thread-safe.
//
// kGelu is the exact x * Phi(x) with Phi the normal CDF (erf form); kGeluTanh is GPT-2's tanh
// approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#pragma once

#include <cmath>

#include "core/hostdevice.h"

namespace mtnlg::kernels {

template <typename T>
MTNLG_HD T gelu_erf(T x) {
  using std::erf;
  return T(0.5) * x * (T(1) + erf(x * T(0.70710678118654752440)));
}

// d/dx [x Phi(x)] = Phi(x) + x phi(x).
template <typename T>
MTNLG_HD T gelu_erf_grad(T x) {
  using std::erf;
  using std::exp;
  const T cdf = T(0.5) * (T(1) + erf(x * T(0.70710678118654752440)));
  const T pdf = exp(T(-0.5) * x * x) * T(0.39894228040143267794);  // 1/sqrt(2 pi)
  return cdf + x * pdf;
}

template <typename T>
MTNLG_HD T gelu_tanh(T x) {
  using std::tanh;
  const T u = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);  // sqrt(2/pi)
  return T(0.5) * x * (T(1) + tanh(u));
}

template <typename T>
MTNLG_HD T gelu_tanh_grad(T x) {
  using std::tanh;
  const T x2 = x * x;
  const T u = T(0.79788456080286535588) * (x + T(0.044715) * x2 * x);
  const T t = tanh(u);
  const T du = T(0.79788456080286535588) * (T(1) + T(3 * 0.044715) * x2);
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
}

}  // namespace mtnlg::kernels
