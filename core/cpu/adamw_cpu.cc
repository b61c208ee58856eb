// AdamW on the CPU: core/kernels/adamw_math.h's element update over fixed blocks in parallel.
#include <cmath>

#include "core/cpu/kernels_cpu.h"
#include "core/kernels/adamw_math.h"

namespace mtnlg::cpu {

template <typename T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWArgs& args) {
  const double step = static_cast<double>(args.step);
  const kernels::AdamWCoeffs<T> k{static_cast<T>(args.lr),
                                  static_cast<T>(args.beta1),
                                  static_cast<T>(args.beta2),
                                  static_cast<T>(args.eps),
                                  static_cast<T>(args.weight_decay),
                                  static_cast<T>(args.grad_scale),
                                  static_cast<T>(1.0 - std::pow(args.beta1, step)),
                                  static_cast<T>(1.0 - std::pow(args.beta2, step))};
  for_blocks(n, [=](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) kernels::adamw_element(param[i], m[i], v[i], grad[i], k);
  });
}

template void adamw_update<float>(float*, const float*, float*, float*, int64_t, const AdamWArgs&);
template void adamw_update<double>(double*, const double*, double*, double*, int64_t,
                                   const AdamWArgs&);

}  // namespace mtnlg::cpu
