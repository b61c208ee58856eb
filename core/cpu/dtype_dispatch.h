// The CPU backend's dtype dispatch: its operations call a kernel template with the C++ type of a
// tensor's dtype (core/cpu/cpu_backend.cc and the kernel files that define their operations).
#pragma once

#include <string>

#include "core/kernels/bf16_math.h"
#include "core/status.h"
#include "core/tensor.h"

namespace mtnlg::cpu {

// Calls f(T{}) with T the C++ type of a floating dtype: f32, f64, and bf16 unless the op
// is wide-only (kWideOnly: the fp32 GEMM fallback and AdamW, which a bf16 model runs on its
// fp32 masters). Other dtypes are unsupported.
template <bool kWideOnly = false, typename F>
void dispatch(const char* op, DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32:
      f(float{});
      return;
    case DType::kF64:
      f(double{});
      return;
    case DType::kBF16:
      if constexpr (!kWideOnly) {
        f(Bf16{});
        return;
      }
      [[fallthrough]];
    case DType::kF16:
      if constexpr (!kWideOnly) {
        if (dtype == DType::kF16) {
          f(F16{});
          return;
        }
      }
      [[fallthrough]];
    default:
      throw unsupported(std::string("CPU backend: ") + op + " does not support dtype " +
                            dtype_name(dtype) +
                            (kWideOnly ? "; use f32 or f64" : "; use f32, bf16, f16 or f64"),
                        op);
  }
}

}  // namespace mtnlg::cpu
