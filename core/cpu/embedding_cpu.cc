// Token + position embedding on the CPU, whole or one vocab-parallel shard of the word rows.
// Forward is parallel over rows. Backward scatters into dwte rows chosen by the tokens, which
// repeat, so it is parallel over column blocks instead: each thread owns a slice of every row and
// adds the tokens in order (no races, fixed order).
#include "core/cpu/kernels_cpu.h"
#include "core/kernels/vocab_shard_math.h"

namespace mtnlg::cpu {
namespace {
constexpr int64_t kColBlock = 64;
}  // namespace

template <typename T>
void embedding_shard_forward(T* out, const int32_t* tokens, const T* wte, int64_t rows,
                             int64_t start, const T* wpe, int64_t b, int64_t s, int64_t c) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < b * s; ++r) {
    const int64_t local = kernels::shard_index(tokens[r], start, rows);
    const T* te = local >= 0 ? wte + local * c : nullptr;
    const T* pe = wpe != nullptr ? wpe + (r % s) * c : nullptr;
    T* y = out + r * c;
    if (te != nullptr && pe != nullptr) {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) y[j] = te[j] + pe[j];
    } else if (te != nullptr || pe != nullptr) {
      const T* src = te != nullptr ? te : pe;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) y[j] = src[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) y[j] = T(0.0f);
    }
  }
}

template <typename T>
void embedding_shard_backward(acc_t<T>* dwte, int64_t rows, int64_t start, acc_t<T>* dwpe,
                              const T* dout, const int32_t* tokens, int64_t b, int64_t s,
                              int64_t c) {
  const int64_t nb = (c + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static)
  for (int64_t ib = 0; ib < nb; ++ib) {
    const int64_t lo = ib * kColBlock, w = std::min(c, lo + kColBlock) - lo;
    for (int64_t r = 0; r < b * s; ++r) {
      const int64_t local = kernels::shard_index(tokens[r], start, rows);
      if (local < 0) continue;
      acc_t<T>* dte = dwte + local * c + lo;
      const T* dy = dout + r * c + lo;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) dte[j] += dy[j];
    }
  }
  if (dwpe == nullptr) return;
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

#define MTNLG_INSTANTIATE(T)                                                                  \
  template void embedding_shard_forward<T>(T*, const int32_t*, const T*, int64_t, int64_t,    \
                                           const T*, int64_t, int64_t, int64_t);              \
  template void embedding_shard_backward<T>(acc_t<T>*, int64_t, int64_t, acc_t<T>*, const T*, \
                                            const int32_t*, int64_t, int64_t, int64_t);
MTNLG_INSTANTIATE(float)
MTNLG_INSTANTIATE(double)
MTNLG_INSTANTIATE(Bf16)
MTNLG_INSTANTIATE(F16)
#undef MTNLG_INSTANTIATE

}  // namespace mtnlg::cpu
