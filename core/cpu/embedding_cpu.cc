// Token + position embedding on the CPU. Forward is parallel over rows. Backward scatters into
// dwte rows chosen by the tokens, which repeat, so it is parallel over column blocks instead:
// each thread owns a slice of every row and adds the tokens in order (no races, fixed order).
#include "core/cpu/kernels_cpu.h"

namespace mtnlg::cpu {
namespace {
constexpr int64_t kColBlock = 64;
}  // namespace

template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int64_t b,
                       int64_t s, int64_t c) {
  // out: [b*s, c], tokens: [b*s], wte: [V, c], wpe: [>= s, c]
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < b * s; ++r) {
    const T* te = wte + static_cast<int64_t>(tokens[r]) * c;
    const T* pe = wpe + (r % s) * c;
    T* y = out + r * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) y[j] = te[j] + pe[j];
  }
}

template <typename T>
void embedding_backward(acc_t<T>* dwte, acc_t<T>* dwpe, const T* dout, const int32_t* tokens,
                        int64_t b, int64_t s, int64_t c) {
  const int64_t nb = (c + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static)
  for (int64_t ib = 0; ib < nb; ++ib) {
    const int64_t lo = ib * kColBlock, w = std::min(c, lo + kColBlock) - lo;
    for (int64_t r = 0; r < b * s; ++r) {
      acc_t<T>* dte = dwte + static_cast<int64_t>(tokens[r]) * c + lo;
      const T* dy = dout + r * c + lo;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) dte[j] += dy[j];
    }
  }
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < s; ++t) {
    acc_t<T>* dpe = dwpe + t * c;
    for (int64_t bi = 0; bi < b; ++bi) {
      const T* dy = dout + (bi * s + t) * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) dpe[j] += dy[j];
    }
  }
}

#define MTNLG_INSTANTIATE(T)                                                                   \
  template void embedding_forward<T>(T*, const int32_t*, const T*, const T*, int64_t, int64_t, \
                                     int64_t);                                                 \
  template void embedding_backward<T>(acc_t<T>*, acc_t<T>*, const T*, const int32_t*, int64_t, \
                                      int64_t, int64_t);
MTNLG_INSTANTIATE(float)
MTNLG_INSTANTIATE(double)
MTNLG_INSTANTIATE(Bf16)
MTNLG_INSTANTIATE(F16)
#undef MTNLG_INSTANTIATE

}  // namespace mtnlg::cpu
