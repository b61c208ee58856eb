// Causal self-attention on the CPU: per (batch, head), scores and products are BLAS GEMMs over
// strided views of the qkv layout, with the softmax (and its backward) row by row in between.
//
// Parallelism: OpenMP over the b*heads independent (b, h) problems, each calling single-threaded
// BLAS (see gemm_cpu.cc). Causality is exploited in row blocks of kRowBlock: rows [i0, i1) only
// need key columns [0, i1), which skips about half of every s*s product.
//
// Layouts (per head h): q, k, v rows at qkv + (b*s + i)*ldq + h*3*hd + {0, hd, 2*hd} with
// ldq = heads*3*hd; out rows at out + (b*s + i)*ldo + h*hd with ldo = heads*hd; probs
// [b, heads, s, s] with zeros above the diagonal.
#include <cmath>
#include <vector>

#include "core/cpu/kernels_cpu.h"

namespace mtnlg::cpu {
namespace {

constexpr int64_t kRowBlock = 64;

// Softmax of row i of scaled scores p[0..i], in place; zeros p[i+1..s).
// noinline and `j < i + 1`: otherwise GCC 12 does not call libmvec's vector expf here.
template <typename T>
__attribute__((noinline)) void causal_softmax_row(T* p, int64_t i, int64_t s) {
  T mx = p[0];
  for (int64_t j = 1; j <= i; ++j) mx = p[j] > mx ? p[j] : mx;
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < i + 1; ++j) {
    const T e = std::exp(p[j] - mx);
    p[j] = e;
    sum += e;
  }
  const T inv = T(1) / sum;
#pragma omp simd
  for (int64_t j = 0; j < i + 1; ++j) p[j] *= inv;
  for (int64_t j = i + 1; j < s; ++j) p[j] = 0;
}

// pd[0..i] = p[0..i] * keep / (1 - p), zeros above the diagonal. Element index of (i, j) is
// row_base + j (backend.h's ((b*heads + h)*s + i)*s + j).
template <typename T>
void dropout_row(T* pd, const T* p, int64_t i, int64_t s, uint64_t row_base, KeepMask& mask,
                 T scale) {
  for (int64_t j = 0; j <= i; ++j) pd[j] = mask.keep(row_base + j) ? p[j] * scale : T(0);
  for (int64_t j = i + 1; j < s; ++j) pd[j] = 0;
}

}  // namespace

template <typename T>
void attention_forward(T* out, T* probs, const T* qkv, int64_t b, int64_t s, int64_t heads,
                       int64_t hd, float dropout_p, RngStream rng) {
  const int64_t ldq = heads * 3 * hd, ldo = heads * hd;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
  const T drop_scale = dropout_p > 0 ? kernels::dropout_scale(static_cast<T>(dropout_p)) : T(1);
#pragma omp parallel
  {
    std::vector<T> dropped(dropout_p > 0 ? static_cast<size_t>(s * s) : 0);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < b * heads; ++bh) {
      const int64_t bi = bh / heads, h = bh % heads;
      const T* q = qkv + bi * s * ldq + h * 3 * hd;
      const T* k = q + hd;
      const T* v = q + 2 * hd;
      T* p = probs + bh * s * s;
      T* o = out + bi * s * ldo + h * hd;
      KeepMask mask(rng, dropout_p);
      for (int64_t i0 = 0; i0 < s; i0 += kRowBlock) {
        const int64_t i1 = std::min(s, i0 + kRowBlock);
        // p[i0:i1, 0:i1] = scale * q[i0:i1] k[0:i1]^T
        gemm_serial(p + i0 * s, s, q + i0 * ldq, ldq, false, k, ldq, true, i1 - i0, i1, hd, scale,
                    T(0));
        for (int64_t i = i0; i < i1; ++i) causal_softmax_row(p + i * s, i, s);
        const T* pv = p;
        if (dropout_p > 0) {
          for (int64_t i = i0; i < i1; ++i)
            dropout_row(dropped.data() + i * s, p + i * s, i, s,
                        static_cast<uint64_t>((bh * s + i) * s), mask, drop_scale);
          pv = dropped.data();
        }
        // o[i0:i1] = pd[i0:i1, 0:i1] v[0:i1]
        gemm_serial(o + i0 * ldo, ldo, pv + i0 * s, s, false, v, ldq, false, i1 - i0, hd, i1, T(1),
                    T(0));
      }
    }
  }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* probs, int64_t b, int64_t s,
                        int64_t heads, int64_t hd, float dropout_p, RngStream rng) {
  const int64_t ldq = heads * 3 * hd, ldo = heads * hd;
  const T scale = T(1) / std::sqrt(static_cast<T>(hd));
  const T drop_scale = dropout_p > 0 ? kernels::dropout_scale(static_cast<T>(dropout_p)) : T(1);
#pragma omp parallel
  {
    std::vector<T> dropped(dropout_p > 0 ? static_cast<size_t>(s * s) : 0);
    std::vector<T> ds(static_cast<size_t>(s * s));
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < b * heads; ++bh) {
      const int64_t bi = bh / heads, h = bh % heads;
      const T* q = qkv + bi * s * ldq + h * 3 * hd;
      const T* k = q + hd;
      const T* v = q + 2 * hd;
      T* dq = dqkv + bi * s * ldq + h * 3 * hd;
      T* dk = dq + hd;
      T* dv = dq + 2 * hd;
      const T* p = probs + bh * s * s;
      const T* dout_h = dout + bi * s * ldo + h * hd;
      KeepMask mask(rng, dropout_p);
      const T* pd = p;  // the probabilities that multiplied v in forward
      if (dropout_p > 0) {
        for (int64_t i = 0; i < s; ++i)
          dropout_row(dropped.data() + i * s, p + i * s, i, s,
                      static_cast<uint64_t>((bh * s + i) * s), mask, drop_scale);
        pd = dropped.data();
      }
      KeepMask mask2(rng, dropout_p);
      for (int64_t i0 = 0; i0 < s; i0 += kRowBlock) {
        const int64_t i1 = std::min(s, i0 + kRowBlock);
        // dpd[i0:i1, 0:i1] = dout[i0:i1] v[0:i1]^T
        gemm_serial(ds.data() + i0 * s, s, dout_h + i0 * ldo, ldo, false, v, ldq, true, i1 - i0, i1,
                    hd, T(1), T(0));
        for (int64_t i = i0; i < i1; ++i) {
          T* d = ds.data() + i * s;
          const T* pr = p + i * s;
          if (dropout_p > 0) {
            const uint64_t base = static_cast<uint64_t>((bh * s + i) * s);
            for (int64_t j = 0; j <= i; ++j) d[j] = mask2.keep(base + j) ? d[j] * drop_scale : T(0);
          }
          // softmax backward: ds = p * (dp - sum_j dp_j p_j)
          T dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int64_t j = 0; j < i + 1; ++j) dot += d[j] * pr[j];
#pragma omp simd
          for (int64_t j = 0; j < i + 1; ++j) d[j] = pr[j] * (d[j] - dot);
          for (int64_t j = i + 1; j < s; ++j) d[j] = 0;
        }
      }
      for (int64_t i0 = 0; i0 < s; i0 += kRowBlock) {
        const int64_t i1 = std::min(s, i0 + kRowBlock);
        // dq[i0:i1] = scale * ds[i0:i1, 0:i1] k[0:i1]
        gemm_serial(dq + i0 * ldq, ldq, ds.data() + i0 * s, s, false, k, ldq, false, i1 - i0, hd,
                    i1, scale, T(0));
        // Key/value rows j in [i0, i1) receive from query rows i >= i0 only (causality):
        // dk[j] = scale * sum_i ds[i, j] q[i]; dv[j] = sum_i pd[i, j] dout[i].
        gemm_serial(dk + i0 * ldq, ldq, ds.data() + i0 * s + i0, s, true, q + i0 * ldq, ldq, false,
                    i1 - i0, hd, s - i0, scale, T(0));
        gemm_serial(dv + i0 * ldq, ldq, pd + i0 * s + i0, s, true, dout_h + i0 * ldo, ldo, false,
                    i1 - i0, hd, s - i0, T(1), T(0));
      }
    }
  }
}

#define MTNLG_INSTANTIATE(T)                                                                       \
  template void attention_forward<T>(T*, T*, const T*, int64_t, int64_t, int64_t, int64_t, float,  \
                                     RngStream);                                                   \
  template void attention_backward<T>(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, \
                                      int64_t, float, RngStream);
MTNLG_INSTANTIATE(float)
MTNLG_INSTANTIATE(double)
#undef MTNLG_INSTANTIATE

}  // namespace mtnlg::cpu
