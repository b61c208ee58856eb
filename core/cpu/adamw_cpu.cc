// AdamW on the CPU: core/kernels/adamw_math.h's element update over fixed blocks in parallel.
#include <cmath>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels_cpu.h"
#include "core/dtype_dispatch.h"
#include "core/kernels/adamw_math.h"

namespace mtnlg::cpu {

namespace {

template <typename T>
void adamw_update(T* param, const T* grad, T* m, T* v, int64_t n, const AdamWArgs& args) {
  const kernels::AdamWCoeffs<T> k = kernels::adamw_coeffs<T>(args);
  for_blocks(n, [=](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) kernels::adamw_element(param[i], m[i], v[i], grad[i], k);
  });
}

// The same on fp32 masters, then param (W = Bf16 or F16) = master rounded, block by block.
template <typename W>
void adamw_update_rounded(W* param, float* master, const float* grad, float* m, float* v, int64_t n,
                          const AdamWArgs& args) {
  const kernels::AdamWCoeffs<float> k = kernels::adamw_coeffs<float>(args);
  for_blocks(n, [=](int64_t lo, int64_t hi) {
    float* mb = master + lo;
    float* mm = m + lo;
    float* vb = v + lo;
    const float* gb = grad + lo;
    const int64_t len = hi - lo;
#pragma omp simd
    for (int64_t i = 0; i < len; ++i) kernels::adamw_element(mb[i], mm[i], vb[i], gb[i], k);
    // The block's masters are still in cache: round them now rather than in a second pass over
    // memory (the same rounding as copy()'s).
    narrow(param + lo, mb, len);
  });
}

}  // namespace

}  // namespace mtnlg::cpu

namespace mtnlg {

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CpuBackend::do_adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                                 const AdamWArgs& args) {
  enter();
  guard_write(param, "adamw_update");
  dispatch_dtype<DTypeSet::kWide>(Device::kCPU, param.dtype(), "adamw_update", [&](auto z) {
    using T = decltype(z);
    cpu::adamw_update(param.data_as<T>(), grad.data_as<T>(), m.data_as<T>(), v.data_as<T>(),
                      param.numel(), args);
  });
}

void CpuBackend::do_adamw_update_rounded(Tensor& param, Tensor& master, const Tensor& grad,
                                         Tensor& m, Tensor& v, const AdamWArgs& args) {
  guard_write(param, "adamw_update_rounded");
  const bool narrow = param.dtype() == DType::kBF16 || param.dtype() == DType::kF16;
  if (!narrow || master.dtype() != DType::kF32) {
    Backend::do_adamw_update_rounded(param, master, grad, m, v, args);  // the default
    return;
  }
  enter();
  float* w = master.data_as<float>();
  if (param.dtype() == DType::kBF16) {
    cpu::adamw_update_rounded(param.data_as<Bf16>(), w, grad.data_as<float>(), m.data_as<float>(),
                              v.data_as<float>(), param.numel(), args);
  } else {
    cpu::adamw_update_rounded(param.data_as<F16>(), w, grad.data_as<float>(), m.data_as<float>(),
                              v.data_as<float>(), param.numel(), args);
  }
}

}  // namespace mtnlg
