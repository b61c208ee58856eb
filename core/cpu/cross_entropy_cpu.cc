// Softmax cross entropy over the first `vocab` of vp columns on the CPU, rows in parallel. Each
// row's max and sum of exponentials accumulate in T; per-row losses are kept and added in row
// order in double, so the returned loss is the same for any thread count.
#include <cmath>
#include <vector>

#include "core/cpu/kernels_cpu.h"

namespace mtnlg::cpu {
namespace {

// log sum_j exp(x[j]) over j < vocab, as (max, sum of exp(x - max)).
template <typename T>
void row_logsumexp(const T* x, int64_t vocab, T& mx, T& sum) {
  mx = x[0];
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < vocab; ++j) mx = x[j] > mx ? x[j] : mx;
  sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < vocab; ++j) sum += std::exp(x[j] - mx);
}

}  // namespace

template <typename T>
double cross_entropy_forward(const T* logits, const int32_t* targets, int64_t n, int64_t vp,
                             int64_t vocab) {
  std::vector<double> row_loss(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* x = logits + r * vp;
    T mx, sum;
    row_logsumexp(x, vocab, mx, sum);
    row_loss[static_cast<size_t>(r)] = static_cast<double>(std::log(sum) + mx - x[targets[r]]);
  }
  double total = 0.0;
  for (double l : row_loss) total += l;
  return total;
}

template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const int32_t* targets, int64_t n,
                            int64_t vp, int64_t vocab, T grad_scale) {
  // Row r is read completely (max, sum) before any of it is written, so dlogits may be logits.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const T* x = logits + r * vp;
    T* dx = dlogits + r * vp;
    T mx, sum;
    row_logsumexp(x, vocab, mx, sum);
    const T inv = grad_scale / sum;
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j) dx[j] = std::exp(x[j] - mx) * inv;
    dx[targets[r]] -= grad_scale;
    for (int64_t j = vocab; j < vp; ++j) dx[j] = 0;
  }
}

#define MTNLG_INSTANTIATE(T)                                                                       \
  template double cross_entropy_forward<T>(const T*, const int32_t*, int64_t, int64_t, int64_t);   \
  template void cross_entropy_backward<T>(T*, const T*, const int32_t*, int64_t, int64_t, int64_t, \
                                          T);
MTNLG_INSTANTIATE(float)
MTNLG_INSTANTIATE(double)
#undef MTNLG_INSTANTIATE

}  // namespace mtnlg::cpu
