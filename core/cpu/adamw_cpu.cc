// AdamW on the CPU: core/kernels/adamw_math.h's element update over fixed blocks in parallel.
#include <cmath>

#include "core/cpu/kernels_cpu.h"
#include "core/kernels/adamw_math.h"

namespace mtnlg::cpu {

template <typename T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWArgs& args) {
  const kernels::AdamWCoeffs<T> k = kernels::adamw_coeffs<T>(args);
  for_blocks(n, [=](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) kernels::adamw_element(param[i], m[i], v[i], grad[i], k);
  });
}

template void adamw_update<float>(float*, const float*, float*, float*, int64_t, const AdamWArgs&);
template void adamw_update<double>(double*, const double*, double*, double*, int64_t,
                                   const AdamWArgs&);

}  // namespace mtnlg::cpu
