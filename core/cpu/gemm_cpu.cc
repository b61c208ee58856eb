// GEMM on the CPU: OpenBLAS, always single-threaded, with the parallel split done by OpenMP.
//
// Why not OpenBLAS's own threads: this is the pthread build of OpenBLAS, whose pool is separate
// from OpenMP's. Letting both run means two pools spinning on two cores, and OpenBLAS's
// thread wake-up makes small GEMMs (attention's per-head products) 4x slower than one thread.
// Splitting the output rows (or columns) over OpenMP threads and calling single-threaded sgemm
// per piece measured as fast as OpenBLAS's 2 threads on the large GEMMs (1024x3072x768: 33 ms
// both) and much faster on small ones, keeps one thread pool, and lets attention call BLAS from
// inside its own parallel loop.
//
// Determinism: a run is bit-reproducible at a given thread count. Across thread counts it is
// not always: each piece sees the whole k dimension, but OpenBLAS picks its kernel by the size of
// each call (on AVX-512 CPUs its small-matrix kernels below about 10^6 multiply-adds and its
// "direct" sgemm below about 7 * 10^6 sum in another order than its packed kernels), so a piece
// and the whole product may round differently (measured: 26 x 3072 x 24 on 1 and 2 threads).
// tests/core/gemm_test.cc checks 1 vs 2 threads to rounding and runs of one count bitwise.
#include <cblas.h>
#include <omp.h>

#include "core/cpu/kernels_cpu.h"

namespace mtnlg::cpu {
namespace {

void blas_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void blas_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double* a, int lda,
               const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Below this many multiply-adds a GEMM runs on one thread: the fork costs more than it saves.
constexpr int64_t kParallelMinFlops = int64_t{1} << 18;

}  // namespace

template <typename T>
void gemm_serial(T* c, int64_t ldc, const T* a, int64_t lda, bool trans_a, const T* b, int64_t ldb,
                 bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, T beta) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // BLAS wants lda >= 1 even when nothing is read; the result is beta * c
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  blas_gemm(trans_a, trans_b, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha,
            a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

template <typename T>
void gemm(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int64_t m, int64_t n, int64_t k,
          T alpha, T beta) {
  // Row-major leading dimensions of the stored (untransposed) matrices.
  const int64_t lda = trans_a ? m : k;
  const int64_t ldb = trans_b ? k : n;
  const int threads = omp_get_max_threads();
  if (threads <= 1 || m * n * k < kParallelMinFlops || m <= 0 || n <= 0 || k <= 0) {
    gemm_serial(c, n, a, lda, trans_a, b, ldb, trans_b, m, n, k, alpha, beta);
    return;
  }
  // Split the larger output dimension, in multiples of 16 (a full AVX-512 float vector).
  const bool split_rows = m >= n;
  const int64_t len = split_rows ? m : n;
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t units = (len + 15) / 16;
    const int64_t lo = std::min(len, units * t / nt * 16);
    const int64_t hi = std::min(len, units * (t + 1) / nt * 16);
    if (hi > lo) {
      if (split_rows) {
        const T* ap = trans_a ? a + lo : a + lo * lda;
        gemm_serial(c + lo * n, n, ap, lda, trans_a, b, ldb, trans_b, hi - lo, n, k, alpha, beta);
      } else {
        const T* bp = trans_b ? b + lo * ldb : b + lo;
        gemm_serial(c + lo, n, a, lda, trans_a, bp, ldb, trans_b, m, hi - lo, k, alpha, beta);
      }
    }
  }
}

#define MTNLG_INSTANTIATE(T)                                                                  \
  template void gemm_serial<T>(T*, int64_t, const T*, int64_t, bool, const T*, int64_t, bool, \
                               int64_t, int64_t, int64_t, T, T);                              \
  template void gemm<T>(T*, const T*, bool, const T*, bool, int64_t, int64_t, int64_t, T, T);
MTNLG_INSTANTIATE(float)
MTNLG_INSTANTIATE(double)
#undef MTNLG_INSTANTIATE

}  // namespace mtnlg::cpu
