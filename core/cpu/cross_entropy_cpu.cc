// Softmax cross entropy over the first `vocab` of vp columns on the CPU, rows in parallel. Each
// row's max and sum of exponentials accumulate in acc_t<T> (float for bf16 logits); per-row losses
// are kept and added in row order in double, so the returned loss is the same for any thread count.
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/cpu/kernels_cpu.h"

namespace mtnlg::cpu {
namespace {

// log sum_j exp(x[j]) over j < vocab, as (max, sum of exp(x - max)).
template <typename A>
void row_logsumexp(const A* x, int64_t vocab, A& mx, A& sum) {
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
    const Widened<T> xw(logits + r * vp, vocab);
    const acc_t<T>* x = xw.get();
    acc_t<T> mx, sum;
    row_logsumexp(x, vocab, mx, sum);
    row_loss[static_cast<size_t>(r)] = static_cast<double>(std::log(sum) + mx - x[targets[r]]);
  }
  double total = 0.0;
  for (double l : row_loss) total += l;
  return total;
}

template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const int32_t* targets, int64_t n,
                            int64_t vp, int64_t vocab, acc_t<T> grad_scale) {
  using A = acc_t<T>;
  // Row r is read completely (max, sum) before any of it is written, so dlogits may be logits.
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    // bf16: the row widened first (dlogits may alias it), p - 1 formed in fp32 and rounded once.
    const Widened<T> xw(logits + r * vp, vocab);
    const Narrowed<T> dxw(dlogits + r * vp, vp, false);
    const A* x = xw.get();
    A* dx = dxw.get();
    // One exp per element, not two: exp(x - max) is kept in dx while it is summed, then scaled
    // (dx may be x: each j is read before it is written).
    A mx = x[0];
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < vocab; ++j) mx = x[j] > mx ? x[j] : mx;
    A sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < vocab; ++j) {
      const A e = std::exp(x[j] - mx);
      dx[j] = e;
      sum += e;
    }
    const A inv = grad_scale / sum;
#pragma omp simd
    for (int64_t j = 0; j < vocab; ++j) dx[j] *= inv;
    dx[targets[r]] -= grad_scale;
    for (int64_t j = vocab; j < vp; ++j) dx[j] = 0;
  }
}

#define MTNLG_INSTANTIATE(T)                                                                       \
  template double cross_entropy_forward<T>(const T*, const int32_t*, int64_t, int64_t, int64_t);   \
  template void cross_entropy_backward<T>(T*, const T*, const int32_t*, int64_t, int64_t, int64_t, \
                                          acc_t<T>);
MTNLG_INSTANTIATE(float)
MTNLG_INSTANTIATE(double)
MTNLG_INSTANTIATE(Bf16)
MTNLG_INSTANTIATE(F16)
#undef MTNLG_INSTANTIATE

}  // namespace mtnlg::cpu
