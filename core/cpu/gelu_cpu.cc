// GeLU on the CPU: CpuBackend's gelu_forward and gelu_backward and their kernels, the per-element
// math of core/kernels/gelu_math.h in `omp simd` loops, which GCC turns into calls to libmvec's
// vector erff/tanhf/expf for float (see kernels_cpu.h).
#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels_cpu.h"
#include "core/dtype_dispatch.h"
#include "core/kernels/gelu_math.h"

namespace mtnlg::cpu {
namespace {

// One block of elements. noinline: inlined into the OpenMP region, GCC 12 stops using the
// vector expf/erff for the erf derivative.
template <typename A>
__attribute__((noinline)) void gelu_backward_block(A* din, const A* dout, const A* in, int64_t lo,
                                                   int64_t hi, Activation act) {
  if (act == Activation::kGelu) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) din[i] = dout[i] * kernels::gelu_erf_grad<A>(in[i]);
  } else {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) din[i] = dout[i] * kernels::gelu_tanh_grad<A>(in[i]);
  }
}

template <typename T>
void gelu_forward(T* out, const T* in, int64_t n, Activation act) {
  using A = acc_t<T>;
  for_blocks(n, [=](int64_t lo, int64_t hi) {
    const Widened<T> xw(in + lo, hi - lo);
    const Narrowed<T> yw(out + lo, hi - lo, false);
    const A* x = xw.get();
    A* y = yw.get();
    if (act == Activation::kGelu) {
#pragma omp simd
      for (int64_t i = 0; i < hi - lo; ++i) y[i] = kernels::gelu_erf<A>(x[i]);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < hi - lo; ++i) y[i] = kernels::gelu_tanh<A>(x[i]);
    }
  });
}

template <typename T>
void gelu_backward(T* din, const T* dout, const T* in, int64_t n, Activation act) {
  for_blocks(n, [=](int64_t lo, int64_t hi) {
    // Both inputs widened before the output is written: din may alias dout.
    const Widened<T> dyw(dout + lo, hi - lo), xw(in + lo, hi - lo);
    const Narrowed<T> dxw(din + lo, hi - lo, false);
    gelu_backward_block(dxw.get(), dyw.get(), xw.get(), 0, hi - lo, act);
  });
}

}  // namespace
}  // namespace mtnlg::cpu

namespace mtnlg {

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CpuBackend::do_gelu_forward(Tensor& out, const Tensor& in, Activation act) {
  enter();
  dispatch_dtype(Device::kCPU, in.dtype(), "gelu_forward", [&](auto z) {
    using T = decltype(z);
    cpu::gelu_forward(out.data_as<T>(), in.data_as<T>(), in.numel(), act);
  });
}

void CpuBackend::do_gelu_backward(Tensor& din, const Tensor& dout, const Tensor& in,
                                  Activation act) {
  enter();
  dispatch_dtype(Device::kCPU, in.dtype(), "gelu_backward", [&](auto z) {
    using T = decltype(z);
    cpu::gelu_backward(din.data_as<T>(), dout.data_as<T>(), in.data_as<T>(), in.numel(), act);
  });
}

}  // namespace mtnlg
