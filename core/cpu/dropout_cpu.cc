// Dropout on the CPU: the keep mask is regenerated from the counter-based stream (core/rng.h)
// in forward and backward, never stored. Fixed blocks of elements in parallel.
#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels_cpu.h"
#include "core/dtype_dispatch.h"

namespace mtnlg::cpu {

namespace {

// out = in * keep / (1 - p); out may alias in. Backward is the same map applied to dout.
template <typename T>
void dropout_forward(T* out, const T* in, int64_t n, float p, RngStream rng) {
  using A = acc_t<T>;
  const A scale = kernels::dropout_scale(static_cast<A>(p));
  for_blocks(n, [=](int64_t lo, int64_t hi) {
    KeepMask mask(rng, p);
    for (int64_t i = lo; i < hi; ++i)
      out[i] = mask.keep(static_cast<uint64_t>(i)) ? in[i] * scale : A(0);
  });
}

}  // namespace

}  // namespace mtnlg::cpu

namespace mtnlg {

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CpuBackend::do_dropout_forward(Tensor& out, const Tensor& in, double p, RngStream rng) {
  enter();
  dispatch_dtype(Device::kCPU, in.dtype(), "dropout", [&](auto z) {
    using T = decltype(z);
    if (p == 0.0) {  // identity: skip drawing random numbers that all say keep
      if (out.data() != in.data()) std::memmove(out.data(), in.data(), in.nbytes());
      return;
    }
    cpu::dropout_forward(out.data_as<T>(), in.data_as<T>(), in.numel(), static_cast<float>(p), rng);
  });
}

void CpuBackend::do_dropout_backward(Tensor& din, const Tensor& dout, double p, RngStream rng) {
  // The same mask and scale applied to the gradient.
  do_dropout_forward(din, dout, p, rng);
}

}  // namespace mtnlg
