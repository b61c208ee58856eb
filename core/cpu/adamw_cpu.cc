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

template <typename W>
void adamw_update_rounded(W* param, float* master, const float* grad, float* m, float* v, int64_t n,
                          const AdamWArgs& args) {
  const kernels::AdamWCoeffs<float> k = kernels::adamw_coeffs<float>(args);
  for_blocks(n, [=](int64_t lo, int64_t hi) {
    float* mb = master + lo;
    float* mm = m + lo;
    float* vb = v + lo;
    const float* gb = grad + lo;
    const int64_t len = hi - lo;
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) kernels::adamw_element(mb[i], mm[i], vb[i], gb[i], k);
    // The block's masters are still in cache: round them now rather than in a second pass over
    // memory (the same rounding as copy()'s).
    narrow(param + lo, mb, len);
  });
}

template void adamw_update<float>(float*, const float*, float*, float*, int64_t, const AdamWArgs&);
template void adamw_update_rounded<Bf16>(Bf16*, float*, const float*, float*, float*, int64_t,
                                         const AdamWArgs&);
template void adamw_update_rounded<F16>(F16*, float*, const float*, float*, float*, int64_t,
                                        const AdamWArgs&);
template void adamw_update<double>(double*, const double*, double*, double*, int64_t,
                                   const AdamWArgs&);

}  // namespace mtnlg::cpu
