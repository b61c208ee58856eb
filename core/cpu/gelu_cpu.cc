// GeLU on the CPU: the per-element math of core/kernels/gelu_math.h in `omp simd` loops, which
// GCC turns into calls to libmvec's vector erff/tanhf/expf for float (see kernels_cpu.h).
#include "core/cpu/kernels_cpu.h"
#include "core/kernels/gelu_math.h"

namespace mtnlg::cpu {
namespace {

// One block of elements. noinline: inlined into the OpenMP region, GCC 12 stops using the
// vector expf/erff for the erf derivative.
template <typename T>
__attribute__((noinline)) void gelu_backward_block(T* din, const T* dout, const T* in, int64_t lo,
                                                   int64_t hi, Activation act) {
  using A = acc_t<T>;
  if (act == Activation::kGelu) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) din[i] = dout[i] * kernels::gelu_erf_grad<A>(in[i]);
  } else {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) din[i] = dout[i] * kernels::gelu_tanh_grad<A>(in[i]);
  }
}

}  // namespace

template <typename T>
void gelu_forward(T* out, const T* in, int64_t n, Activation act) {
  using A = acc_t<T>;
  for_blocks(n, [=](int64_t lo, int64_t hi) {
    if (act == Activation::kGelu) {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) out[i] = kernels::gelu_erf<A>(in[i]);
    } else {
#pragma omp simd
      for (int64_t i = lo; i < hi; ++i) out[i] = kernels::gelu_tanh<A>(in[i]);
    }
  });
}

template <typename T>
void gelu_backward(T* din, const T* dout, const T* in, int64_t n, Activation act) {
  for_blocks(n, [=](int64_t lo, int64_t hi) { gelu_backward_block(din, dout, in, lo, hi, act); });
}

template void gelu_forward<float>(float*, const float*, int64_t, Activation);
template void gelu_forward<double>(double*, const double*, int64_t, Activation);
template void gelu_backward<float>(float*, const float*, const float*, int64_t, Activation);
template void gelu_backward<double>(double*, const double*, const double*, int64_t, Activation);
template void gelu_forward<Bf16>(Bf16*, const Bf16*, int64_t, Activation);
template void gelu_backward<Bf16>(Bf16*, const Bf16*, const Bf16*, int64_t, Activation);

}  // namespace mtnlg::cpu
