// AdamW per-element update, shared by the CPU kernel (core/cpu/adamw_cpu.cc) and the CUDA one.
// Pure function of its arguments: thread-safe.
//
// Decoupled weight decay (Loshchilov & Hutter): the decay term uses the parameter before the
// update and is not scaled by the adaptive denominator.
#pragma once

#include <cmath>

#include "core/backend.h"
#include "core/hostdevice.h"

namespace mtnlg::kernels {

// Per-step constants, computed once on the host in double and rounded to T.
template <typename T>
struct AdamWCoeffs {
  T lr, beta1, beta2, eps, weight_decay, grad_scale;
  T bias_correction1;  // 1 - beta1^step
  T bias_correction2;  // 1 - beta2^step
};

// Every multiply-add is an explicit fma and no product feeds a sum, so no compiler is left a
// contraction to choose: the CPU loop, its vector tail and each CUDA kernel (one tensor, a batch,
// fp32 masters) run the same IEEE operations and agree bit for bit. Compilers contract a * b + c
// differently in each inlining context (nvcc did, and the batched step lost last bits against
// the one-tensor one); tests/core/adamw_exact_test.cc compiles the sequence below, contraction
// off, as the reference.
template <typename T>
MTNLG_HD void adamw_element(T& param, T& m, T& v, T grad, const AdamWCoeffs<T>& k) {
  using std::fma;
  using std::sqrt;
  const T g = grad * k.grad_scale;
  m = fma(k.beta1, m, (T(1) - k.beta1) * g);
  v = fma(k.beta2, v, ((T(1) - k.beta2) * g) * g);
  const T mhat = m / k.bias_correction1;
  const T vhat = v / k.bias_correction2;
  const T update = fma(k.weight_decay, param, mhat / (sqrt(vhat) + k.eps));
  param = fma(-k.lr, update, param);
}

// The per-step constants of one Backend::adamw_update call: computed once on the host in double
// (the bias corrections from the step count) and rounded to T, the same on every backend.
template <typename T>
inline AdamWCoeffs<T> adamw_coeffs(const AdamWArgs& args) {
  const double step = static_cast<double>(args.step);
  return {static_cast<T>(args.lr),
          static_cast<T>(args.beta1),
          static_cast<T>(args.beta2),
          static_cast<T>(args.eps),
          static_cast<T>(args.weight_decay),
          static_cast<T>(args.grad_scale),
          static_cast<T>(1.0 - std::pow(args.beta1, step)),
          static_cast<T>(1.0 - std::pow(args.beta2, step))};
}

}  // namespace mtnlg::kernels
