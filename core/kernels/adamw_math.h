// AdamW per-element update, shared by the CPU kernel (core/cpu/adamw_cpu.cc) and the CUDA one.
// Pure function of its arguments: thread-safe.
//
// Decoupled weight decay (Loshchilov & Hutter): the decay term uses the parameter before the
// update and is not scaled by the adaptive denominator.
#pragma once

#include <cmath>
#include <cstdint>

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

// 1 - beta^step in double, on the host only: a device's pow may differ in the last bit, so a
// step that reads its bias corrections from device words (AdamWStepWords) gets them uploaded.
inline double adamw_bias_correction(double beta, int64_t step) {
  return 1.0 - std::pow(beta, static_cast<double>(step));
}

// The per-step constants of one Backend::adamw_update call: computed once on the host in double
// (the bias corrections from the step count) and rounded to T, the same on every backend.
template <typename T>
inline AdamWCoeffs<T> adamw_coeffs(const AdamWArgs& args) {
  return {
      static_cast<T>(args.lr),
      static_cast<T>(args.beta1),
      static_cast<T>(args.beta2),
      static_cast<T>(args.eps),
      static_cast<T>(args.weight_decay),
      static_cast<T>(args.grad_scale),
      static_cast<T>(args.bias_correction1 != 0.0 ? args.bias_correction1
                                                  : adamw_bias_correction(args.beta1, args.step)),
      static_cast<T>(args.bias_correction2 != 0.0 ? args.bias_correction2
                                                  : adamw_bias_correction(args.beta2, args.step))};
}

// adamw_coeffs with the step's values taken from its device words (Backend::
// adamw_update_many_from): the same doubles rounded the same way.
template <typename T>
MTNLG_HD AdamWCoeffs<T> adamw_coeffs_from(AdamWCoeffs<T> k, const double* words) {
  k.lr = static_cast<T>(words[AdamWStepWords::kLr]);
  k.grad_scale = static_cast<T>(words[AdamWStepWords::kGradScale]);
  k.bias_correction1 = static_cast<T>(words[AdamWStepWords::kBiasCorrection1]);
  k.bias_correction2 = static_cast<T>(words[AdamWStepWords::kBiasCorrection2]);
  return k;
}

// Whether x is neither infinite nor NaN, the same on the host and the device (x - x is NaN
// exactly then).
MTNLG_HD bool finite_double(double x) {
  return x - x == 0.0;
}

// The factor that brings a gradient of norm `norm` within `max_norm`: 1 when clipping is off
// (max_norm <= 0) or the norm is within it (or NaN); else max_norm / (norm + 1e-6), Megatron's
// epsilon. The one formula of the host's clipping and the device's (grad_clip_words).
MTNLG_HD double clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) return 1.0;
  return max_norm / (norm + 1e-6);
}

// Backend::grad_clip_words's arithmetic on `n` per-tensor sums of squares, in the host's order
// (global_grad_norm: the first `first` sums, the rest, then the two added): the words a step
// writes on the device (AdamWStepWords), the values the host's path computes from the same sums.
MTNLG_HD void grad_clip_words(double* words, const double* sums, int64_t n, int64_t first,
                              double loss, double max_norm) {
  using std::sqrt;
  double head = 0.0, tail = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (i < first)
      head += sums[i];
    else
      tail += sums[i];
  }
  const double total = head + tail;
  const double loss_scale = words[AdamWStepWords::kLossScale];
  const double norm = sqrt(total) / loss_scale;
  words[AdamWStepWords::kGradScale] = clip_coefficient(norm, max_norm) / loss_scale;
  words[AdamWStepWords::kSkip] = finite_double(total) && finite_double(loss) ? 0.0 : 1.0;
  words[AdamWStepWords::kSumSquares] = total;
  words[AdamWStepWords::kLoss] = loss;
}

}  // namespace mtnlg::kernels
