// Calls a kernel template with the storage type of a floating tensor's dtype, for both backends'
// operations (core/cpu/<family>_cpu.cc, core/cuda/<family>_cuda.cu): one switch and one message.
#pragma once

#include <string>

#include "core/kernels/bf16_math.h"
#include "core/status.h"
#include "core/tensor.h"

namespace mtnlg {

// Calls f(T{}) with T = float, double, Bf16 or F16 for `dtype`: the storage type; kernels compute
// in acc_t<T>. kWideOnly: f32 and f64 only (the CPU's fp32 GEMM fallback and AdamW, which a
// bf16/fp16 model runs on its fp32 masters). Any other dtype is Code::kUnsupported naming the
// operation, the device and the dtypes it takes.
template <bool kWideOnly = false, typename F>
void dispatch_floating(Device device, DType dtype, const char* op, F&& f) {
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
      break;
    case DType::kF16:
      if constexpr (!kWideOnly) {
        f(F16{});
        return;
      }
      break;
    default:
      break;
  }
  throw unsupported(std::string(op) + " on " + device_name(device) + " supports " +
                        (kWideOnly ? "f32 and f64 (a bf16/fp16 model updates its fp32 masters)"
                                   : "f32, f64, bf16 and f16") +
                        ", not " + dtype_name(dtype),
                    op);
}

}  // namespace mtnlg
