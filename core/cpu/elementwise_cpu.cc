// Elementwise and bias kernels on the CPU: fill, convert, add, axpy, scale, sum of squares,
// bias add and its backward. See kernels_cpu.h for the threading and determinism rules.
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels_cpu.h"
#include "core/dtype_dispatch.h"
#include "core/kernels/bf16_math.h"

namespace mtnlg::cpu {
namespace {
// Columns per work item of the bias kernels: one cache line of doubles or two of floats.
constexpr int64_t kColBlock = 64;
}  // namespace

template <typename T>
void fill(T* x, T value, int64_t n) {
  for_blocks(n, [=](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) x[i] = value;
  });
}

template <typename To, typename From>
void convert(To* dst, const From* src, int64_t n) {
  for_blocks(n, [=](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) dst[i] = static_cast<To>(src[i]);
  });
}

namespace {

template <typename T>
void add(T* out, const T* a, const T* b, int64_t n) {
  for_blocks(n, [=](int64_t lo, int64_t hi) {
    // Inputs widened before the output is written: out may alias a or b.
    const Widened<T> aw(a + lo, hi - lo), bw(b + lo, hi - lo);
    const Narrowed<T> ow(out + lo, hi - lo, false);
    const acc_t<T>*x = aw.get(), *z = bw.get();
    acc_t<T>* o = ow.get();
#pragma omp simd
    for (int64_t i = 0; i < hi - lo; ++i) o[i] = x[i] + z[i];
  });
}

template <typename T>
void axpy(T* y, const T* x, acc_t<T> alpha, int64_t n) {
  for_blocks(n, [=](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) y[i] = y[i] + alpha * x[i];
  });
}

template <typename T>
void scale(T* x, acc_t<T> alpha, int64_t n) {
  for_blocks(n, [=](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) x[i] = x[i] * alpha;
  });
}

template <typename T>
double sum_squares(const T* x, int64_t n) {
  // One partial per fixed block, added in block order: the same sum for any thread count.
  const int64_t nb = (n + kElemBlock - 1) / kElemBlock;
  std::vector<double> partial(static_cast<size_t>(nb));
  double* part = partial.data();
  for_blocks(n, [=](int64_t lo, int64_t hi) {
    // Indexing from the block's own pointer: with x[i] over [lo, hi) GCC 12 vectorised this
    // loop with gathers, 4x slower than the contiguous loads it makes of this form.
    const T* xb = x + lo;
    const int64_t len = hi - lo;
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = 0; i < len; ++i)
      acc += static_cast<double>(xb[i]) * static_cast<double>(xb[i]);
    part[lo / kElemBlock] = acc;
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

// y: [n, c] += bias: [c]
template <typename T>
void add_bias(T* y, const T* bias, int64_t n, int64_t c) {
  const Widened<T> bw(bias, c);
  const acc_t<T>* b = bw.get();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n; ++r) {
    const Narrowed<T> rw(y + r * c, c, true);
    acc_t<T>* row = rw.get();
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) row[j] += b[j];
  }
}

// dbias: [c] += sum over rows of dy: [n, c]
template <typename T>
void bias_backward(acc_t<T>* dbias, const T* dy, int64_t n, int64_t c) {
  // Parallel over column blocks, rows summed in order: no reduction across threads.
  const int64_t nb = (c + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static)
  for (int64_t ib = 0; ib < nb; ++ib) {
    const int64_t lo = ib * kColBlock, w = std::min(c, lo + kColBlock) - lo;
    acc_t<T> acc[kColBlock] = {};
    for (int64_t r = 0; r < n; ++r) {
      const T* row = dy + r * c + lo;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) acc[j] += row[j];
    }
    for (int64_t j = 0; j < w; ++j) dbias[lo + j] += acc[j];
  }
}

}  // namespace

#define MTNLG_INSTANTIATE(T) template void fill<T>(T*, T, int64_t);
MTNLG_INSTANTIATE(float)
MTNLG_INSTANTIATE(double)
MTNLG_INSTANTIATE(Bf16)
MTNLG_INSTANTIATE(F16)
#undef MTNLG_INSTANTIATE
template void fill<int32_t>(int32_t*, int32_t, int64_t);
template <typename T>
void narrow_all(T* dst, const float* src, int64_t n) {
  for_blocks(n, [=](int64_t lo, int64_t hi) { narrow(dst + lo, src + lo, hi - lo); });
}

template <typename T>
void widen_all(float* dst, const T* src, int64_t n) {
  for_blocks(n, [=](int64_t lo, int64_t hi) { widen(dst + lo, src + lo, hi - lo); });
}

template void narrow_all<Bf16>(Bf16*, const float*, int64_t);
template void narrow_all<F16>(F16*, const float*, int64_t);
template void widen_all<Bf16>(float*, const Bf16*, int64_t);
template void widen_all<F16>(float*, const F16*, int64_t);
// Through float: a narrow model's host-drawn f64 weights are the fp32 model's, rounded.
template void convert<float, double>(float*, const double*, int64_t);
template void convert<double, float>(double*, const float*, int64_t);
template void convert<Bf16, double>(Bf16*, const double*, int64_t);
template void convert<double, Bf16>(double*, const Bf16*, int64_t);
template void convert<F16, double>(F16*, const double*, int64_t);
template void convert<double, F16>(double*, const F16*, int64_t);

}  // namespace mtnlg::cpu

namespace mtnlg {

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CpuBackend::do_fill(Tensor& t, double value) {
  enter();
  guard_write(t, "fill");
  if (t.dtype() == DType::kI32) {
    cpu::fill(t.data_as<int32_t>(), static_cast<int32_t>(value), t.numel());
    return;
  }
  dispatch_dtype(Device::kCPU, t.dtype(), "fill", [&](auto z) {
    using T = decltype(z);
    cpu::fill(t.data_as<T>(), static_cast<T>(value), t.numel());
  });
}

void CpuBackend::do_add_bias(Tensor& y, const Tensor& bias) {
  enter();
  const int64_t c = y.dim(-1);
  dispatch_dtype(Device::kCPU, y.dtype(), "add_bias", [&](auto z) {
    using T = decltype(z);
    cpu::add_bias(y.data_as<T>(), bias.data_as<T>(), y.numel() / c, c);
  });
}

void CpuBackend::do_bias_backward(Tensor& dbias, const Tensor& dy) {
  enter();
  const int64_t c = dy.dim(-1);
  dispatch_dtype(Device::kCPU, dy.dtype(), "bias_backward", [&](auto z) {
    using T = decltype(z);
    cpu::bias_backward(dbias.data_as<acc_t<T>>(), dy.data_as<T>(), dy.numel() / c, c);
  });
}

void CpuBackend::do_add(Tensor& out, const Tensor& a, const Tensor& b) {
  enter();
  guard_write(out, "add");
  dispatch_dtype(Device::kCPU, out.dtype(), "add", [&](auto z) {
    using T = decltype(z);
    cpu::add(out.data_as<T>(), a.data_as<T>(), b.data_as<T>(), out.numel());
  });
}

void CpuBackend::do_axpy(Tensor& y, const Tensor& x, double alpha) {
  enter();
  guard_write(y, "axpy");
  dispatch_dtype(Device::kCPU, y.dtype(), "axpy", [&](auto z) {
    using T = decltype(z);
    cpu::axpy(y.data_as<T>(), x.data_as<T>(), static_cast<acc_t<T>>(alpha), y.numel());
  });
}

void CpuBackend::do_scale(Tensor& x, double alpha) {
  enter();
  guard_write(x, "scale");
  dispatch_dtype(Device::kCPU, x.dtype(), "scale", [&](auto z) {
    using T = decltype(z);
    cpu::scale(x.data_as<T>(), static_cast<acc_t<T>>(alpha), x.numel());
  });
}

double CpuBackend::do_sum_squares(const Tensor& x) {
  enter();
  double result = 0.0;
  dispatch_dtype(Device::kCPU, x.dtype(), "sum_squares", [&](auto z) {
    using T = decltype(z);
    result = cpu::sum_squares(x.data_as<T>(), x.numel());
  });
  return result;
}

}  // namespace mtnlg
