// Causal self-attention on the CPU: per (batch, head), scores and products are BLAS GEMMs over
// strided views of the qkv layout, with the softmax (and its backward) row by row in between.
//
// Parallelism: OpenMP over the b*heads independent (b, h) problems, each calling single-threaded
// BLAS (see gemm_cpu.cc). Causality is exploited in row blocks of kRowBlock: rows [i0, i1) only
// need key columns [0, i1), which skips about half of every s*s product.
//
// Layouts (per head h): q, k, v rows at qkv + (b*s + i)*ldq + h*3*hd + {0, hd, 2*hd} with
// ldq = heads*3*hd; out rows at out + (b*s + i)*ldo + h*hd with ldo = heads*hd; stats [b, heads,
// s], each row's log-sum-exp. The probabilities [s, s] of one head live in per-thread scratch
// only: backward recomputes them from the same score GEMM and the saved log-sum-exp, bit for bit
// what forward used.
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/cpu/attention_rows.h"
#include "core/cpu/kernels_cpu.h"

namespace mtnlg::cpu {
namespace {

constexpr int64_t kRowBlock = 64;

// p[i0:i1, 0:i1] = scale * q[i0:i1] k[0:i1]^T: one row block's scores, the same call in forward
// and backward.
template <typename A>
void block_scores(A* p, const A* q, int64_t ldq, int64_t s, int64_t hd, int64_t i0, int64_t i1) {
  const A scale = A(1) / std::sqrt(static_cast<A>(hd));
  gemm_serial(p + i0 * s, s, q + i0 * ldq, ldq, false, q + hd, ldq, true, i1 - i0, i1, hd, scale,
              A(0));
}

// One (batch, head) problem in A = acc_t<T>. q, k, v rows at q + i*ldq (+hd, +2hd); o rows at
// o + i*ldo; lse [s] (written); bh picks the dropout element indices. p, dropped: [s, s] scratch.
template <typename A>
void head_forward(A* o, int64_t ldo, A* lse, const A* q, int64_t ldq, int64_t s, int64_t hd,
                  int64_t bh, float dropout_p, RngStream rng, A* p, A* dropped) {
  const A drop_scale = dropout_p > 0 ? kernels::dropout_scale(static_cast<A>(dropout_p)) : A(1);
  const A* v = q + 2 * hd;
  KeepMask mask(rng, dropout_p);
  for (int64_t i0 = 0; i0 < s; i0 += kRowBlock) {
    const int64_t i1 = std::min(s, i0 + kRowBlock);
    block_scores(p, q, ldq, s, hd, i0, i1);
    for (int64_t i = i0; i < i1; ++i) lse[i] = causal_softmax_row_lse(p + i * s, i, s);
    const A* pv = p;
    if (dropout_p > 0) {
      for (int64_t i = i0; i < i1; ++i)
        dropout_row(dropped + i * s, p + i * s, i, s, static_cast<uint64_t>((bh * s + i) * s), mask,
                    drop_scale);
      pv = dropped;
    }
    // o[i0:i1] = pd[i0:i1, 0:i1] v[0:i1]
    gemm_serial(o + i0 * ldo, ldo, pv + i0 * s, s, false, v, ldq, false, i1 - i0, hd, i1, A(1),
                A(0));
  }
}

// Backward of head_forward: dq, dk, dv rows at dq + i*ldq (+hd, +2hd), overwritten; dout rows at
// dout + i*ldo; lse forward's. p, dropped, ds: [s, s] scratch.
template <typename A>
void head_backward(A* dq, const A* dout, int64_t ldo, const A* q, int64_t ldq, const A* lse,
                   int64_t s, int64_t hd, int64_t bh, float dropout_p, RngStream rng, A* p,
                   A* dropped, A* ds) {
  const A scale = A(1) / std::sqrt(static_cast<A>(hd));
  // Forward's probabilities again: its score GEMMs, then exp(score - lse).
  for (int64_t i0 = 0; i0 < s; i0 += kRowBlock) {
    const int64_t i1 = std::min(s, i0 + kRowBlock);
    block_scores(p, q, ldq, s, hd, i0, i1);
    for (int64_t i = i0; i < i1; ++i) causal_probs_row(p + i * s, i, s, lse[i]);
  }
  const A drop_scale = dropout_p > 0 ? kernels::dropout_scale(static_cast<A>(dropout_p)) : A(1);
  const A* k = q + hd;
  const A* v = q + 2 * hd;
  A* dk = dq + hd;
  A* dv = dq + 2 * hd;
  KeepMask mask(rng, dropout_p);
  const A* pd = p;  // the probabilities that multiplied v in forward
  if (dropout_p > 0) {
    for (int64_t i = 0; i < s; ++i)
      dropout_row(dropped + i * s, p + i * s, i, s, static_cast<uint64_t>((bh * s + i) * s), mask,
                  drop_scale);
    pd = dropped;
  }
  KeepMask mask2(rng, dropout_p);
  for (int64_t i0 = 0; i0 < s; i0 += kRowBlock) {
    const int64_t i1 = std::min(s, i0 + kRowBlock);
    // dpd[i0:i1, 0:i1] = dout[i0:i1] v[0:i1]^T
    gemm_serial(ds + i0 * s, s, dout + i0 * ldo, ldo, false, v, ldq, true, i1 - i0, i1, hd, A(1),
                A(0));
    for (int64_t i = i0; i < i1; ++i) {
      A* d = ds + i * s;
      const A* pr = p + i * s;
      if (dropout_p > 0) {
        const uint64_t base = static_cast<uint64_t>((bh * s + i) * s);
        for (int64_t j = 0; j <= i; ++j) d[j] = mask2.keep(base + j) ? d[j] * drop_scale : A(0);
      }
      // softmax backward: ds = p * (dp - sum_j dp_j p_j)
      A dot = 0;
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
    gemm_serial(dq + i0 * ldq, ldq, ds + i0 * s, s, false, k, ldq, false, i1 - i0, hd, i1, scale,
                A(0));
    // Key/value rows j in [i0, i1) receive from query rows i >= i0 only (causality):
    // dk[j] = scale * sum_i ds[i, j] q[i]; dv[j] = sum_i pd[i, j] dout[i].
    gemm_serial(dk + i0 * ldq, ldq, ds + i0 * s + i0, s, true, q + i0 * ldq, ldq, false, i1 - i0,
                hd, s - i0, scale, A(0));
    gemm_serial(dv + i0 * ldq, ldq, pd + i0 * s + i0, s, true, dout + i0 * ldo, ldo, false, i1 - i0,
                hd, s - i0, A(1), A(0));
  }
}

// rows x cols elements between strided row-major layouts, converting the element type.
template <typename To, typename From>
void copy_rows(To* dst, int64_t ldd, const From* src, int64_t lds, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    To* d = dst + i * ldd;
    const From* x = src + i * lds;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) d[j] = static_cast<To>(x[j]);
  }
}

}  // namespace

// A float/double head runs on the tensors in place. A bf16/fp16 head is widened into per-thread
// fp32 copies of its q, k, v (and dout), runs the same fp32 code (softmax and its backward in
// fp32) and is rounded once on the way out.
template <typename T>
void attention_forward(T* out, acc_t<T>* stats, const T* qkv, int64_t b, int64_t s, int64_t heads,
                       int64_t hd, float dropout_p, RngStream rng) {
  using A = acc_t<T>;
  constexpr bool kStaged = !std::is_same_v<T, A>;
  const int64_t ldq = heads * 3 * hd, ldo = heads * hd;
#pragma omp parallel
  {
    std::vector<A> p(static_cast<size_t>(s * s));
    std::vector<A> dropped(dropout_p > 0 ? static_cast<size_t>(s * s) : 0);
    std::vector<A> stage(kStaged ? static_cast<size_t>(s * 4 * hd) : 0);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < b * heads; ++bh) {
      const int64_t bi = bh / heads, h = bh % heads;
      const T* q = qkv + bi * s * ldq + h * 3 * hd;
      A* lse = stats + bh * s;
      T* o = out + bi * s * ldo + h * hd;
      if constexpr (kStaged) {
        A* sq = stage.data();     // [s, 3hd]
        A* so = sq + s * 3 * hd;  // [s, hd]
        copy_rows(sq, 3 * hd, q, ldq, s, 3 * hd);
        head_forward(so, hd, lse, sq, 3 * hd, s, hd, bh, dropout_p, rng, p.data(), dropped.data());
        copy_rows(o, ldo, so, hd, s, hd);
      } else {
        head_forward(o, ldo, lse, q, ldq, s, hd, bh, dropout_p, rng, p.data(), dropped.data());
      }
    }
  }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const acc_t<T>* stats, int64_t b,
                        int64_t s, int64_t heads, int64_t hd, float dropout_p, RngStream rng) {
  using A = acc_t<T>;
  constexpr bool kStaged = !std::is_same_v<T, A>;
  const int64_t ldq = heads * 3 * hd, ldo = heads * hd;
#pragma omp parallel
  {
    std::vector<A> p(static_cast<size_t>(s * s));
    std::vector<A> dropped(dropout_p > 0 ? static_cast<size_t>(s * s) : 0);
    std::vector<A> ds(static_cast<size_t>(s * s));
    std::vector<A> stage(kStaged ? static_cast<size_t>(s * 7 * hd) : 0);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < b * heads; ++bh) {
      const int64_t bi = bh / heads, h = bh % heads;
      const T* q = qkv + bi * s * ldq + h * 3 * hd;
      T* dq = dqkv + bi * s * ldq + h * 3 * hd;
      const A* lse = stats + bh * s;
      const T* dout_h = dout + bi * s * ldo + h * hd;
      if constexpr (kStaged) {
        A* sq = stage.data();       // [s, 3hd]
        A* sdq = sq + s * 3 * hd;   // [s, 3hd]
        A* sdo = sdq + s * 3 * hd;  // [s, hd]
        copy_rows(sq, 3 * hd, q, ldq, s, 3 * hd);
        copy_rows(sdo, hd, dout_h, ldo, s, hd);
        head_backward(sdq, sdo, hd, sq, 3 * hd, lse, s, hd, bh, dropout_p, rng, p.data(),
                      dropped.data(), ds.data());
        copy_rows(dq, ldq, sdq, 3 * hd, s, 3 * hd);
      } else {
        head_backward(dq, dout_h, ldo, q, ldq, lse, s, hd, bh, dropout_p, rng, p.data(),
                      dropped.data(), ds.data());
      }
    }
  }
}

#define MTNLG_INSTANTIATE(T)                                                                      \
  template void attention_forward<T>(T*, acc_t<T>*, const T*, int64_t, int64_t, int64_t, int64_t, \
                                     float, RngStream);                                           \
  template void attention_backward<T>(T*, const T*, const T*, const acc_t<T>*, int64_t, int64_t,  \
                                      int64_t, int64_t, float, RngStream);
MTNLG_INSTANTIATE(float)
MTNLG_INSTANTIATE(double)
MTNLG_INSTANTIATE(Bf16)
MTNLG_INSTANTIATE(F16)
#undef MTNLG_INSTANTIATE

}  // namespace mtnlg::cpu
