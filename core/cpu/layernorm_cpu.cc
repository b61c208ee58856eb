// LayerNorm on the CPU (llm.c's layernorm_forward/backward), rows in parallel, each row's
// statistics accumulated in A = acc_t<T> (float for training, also for a bf16 model); the
// arithmetic is core/kernels/layernorm_math.h's, which the CUDA kernels share. The weight and
// bias gradients are column reductions over rows, done in a second pass parallel over column
// blocks so that no two threads add into the same element and the sum order is fixed.
#include <cmath>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels_cpu.h"
#include "core/dtype_dispatch.h"
#include "core/kernels/layernorm_math.h"

namespace mtnlg::cpu {
namespace {
constexpr int64_t kColBlock = 64;

// out: [n, c], mean, rstd: [n], in: [n, c], w, b: [c]
template <typename T>
void layernorm_forward(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* in, const T* w, const T* b,
                       int64_t n, int64_t c, acc_t<T> eps) {
  using A = acc_t<T>;
  // out: [n, c], mean: [n], rstd: [n], in: [n, c], w: [c], b: [c]
  const Widened<T> ww(w, c), bw(b, c);
  const A *wv = ww.get(), *bv = bw.get();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const Widened<T> xw(in + r * c, c);
    const Narrowed<T> yw(out + r * c, c, false);
    const A* x = xw.get();
    A* y = yw.get();
    A sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < c; ++j) sum += x[j];
    const A m = sum / static_cast<A>(c);
    A sq = 0;  // two-pass variance: no cancellation when |mean| >> std
#pragma omp simd reduction(+ : sq)
    for (int64_t j = 0; j < c; ++j) sq += (x[j] - m) * (x[j] - m);
    const A s = kernels::layernorm_rstd(sq, c, eps);
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) y[j] = kernels::layernorm_out(x[j], m, s, wv[j], bv[j]);
    mean[r] = m;
    rstd[r] = s;
  }
}

// din: [n, c] (accumulates), dw, db: [c] (accumulate)
template <typename T>
void layernorm_backward(T* din, acc_t<T>* dw, acc_t<T>* db, const T* dout, const T* in, const T* w,
                        const acc_t<T>* mean, const acc_t<T>* rstd, int64_t n, int64_t c) {
  using A = acc_t<T>;
  // din: [n, c] +=, dw, db: [c] +=, dout, in: [n, c], w: [c], mean, rstd: [n]
  const Widened<T> ww(w, c);
  const A* wv = ww.get();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const Widened<T> xw(in + r * c, c), dyw(dout + r * c, c);
    const Narrowed<T> dxw(din + r * c, c, true);
    const A *x = xw.get(), *dy = dyw.get();
    A* dx = dxw.get();
    const A m = mean[r], s = rstd[r];
    A dnorm_mean = 0, dnorm_norm_mean = 0;
#pragma omp simd reduction(+ : dnorm_mean, dnorm_norm_mean)
    for (int64_t j = 0; j < c; ++j) {
      const A dnorm = kernels::layernorm_dnorm(wv[j], dy[j]);
      dnorm_mean += dnorm;
      dnorm_norm_mean += kernels::layernorm_dnorm_norm(dnorm, x[j], m, s);
    }
    dnorm_mean /= static_cast<A>(c);
    dnorm_norm_mean /= static_cast<A>(c);
#pragma omp simd
    for (int64_t j = 0; j < c; ++j)
      dx[j] += kernels::layernorm_dx(x[j], dy[j], wv[j], m, s, dnorm_mean, dnorm_norm_mean);
  }
  const int64_t nb = (c + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static)
  for (int64_t ib = 0; ib < nb; ++ib) {
    const int64_t lo = ib * kColBlock, wd = std::min(c, lo + kColBlock) - lo;
    A gw[kColBlock] = {}, gb[kColBlock] = {};
    for (int64_t r = 0; r < n; ++r) {
      const T* x = in + r * c + lo;
      const T* dy = dout + r * c + lo;
      const A m = mean[r], s = rstd[r];
#pragma omp simd
      for (int64_t j = 0; j < wd; ++j) {
        gw[j] += kernels::layernorm_dw(static_cast<A>(dy[j]), static_cast<A>(x[j]), m, s);
        gb[j] += dy[j];
      }
    }
    for (int64_t j = 0; j < wd; ++j) {
      dw[lo + j] += gw[j];
      db[lo + j] += gb[j];
    }
  }
}

}  // namespace

}  // namespace mtnlg::cpu

namespace mtnlg {

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CpuBackend::do_layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& in,
                                      const Tensor& weight, const Tensor& bias, double eps) {
  enter();
  const int64_t c = in.dim(-1), n = in.numel() / c;  // checked by Backend::layernorm_forward
  const DType dt = in.dtype();
  dispatch_dtype(Device::kCPU, dt, "layernorm_forward", [&](auto z) {
    using T = decltype(z);
    using A = acc_t<T>;
    cpu::layernorm_forward(out.data_as<T>(), mean.data_as<A>(), rstd.data_as<A>(), in.data_as<T>(),
                           weight.data_as<T>(), bias.data_as<T>(), n, c, static_cast<A>(eps));
  });
}

void CpuBackend::do_layernorm_backward(Tensor& din, Tensor& dweight, Tensor& dbias,
                                       const Tensor& dout, const Tensor& in, const Tensor& weight,
                                       const Tensor& mean, const Tensor& rstd) {
  enter();
  const int64_t c = in.dim(-1), n = in.numel() / c;  // checked by Backend::layernorm_backward
  const DType dt = in.dtype();
  dispatch_dtype(Device::kCPU, dt, "layernorm_backward", [&](auto z) {
    using T = decltype(z);
    using A = acc_t<T>;
    cpu::layernorm_backward(din.data_as<T>(), dweight.data_as<A>(), dbias.data_as<A>(),
                            dout.data_as<T>(), in.data_as<T>(), weight.data_as<T>(),
                            mean.data_as<A>(), rstd.data_as<A>(), n, c);
  });
}

}  // namespace mtnlg
