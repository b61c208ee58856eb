// Calls a template with the storage type of a tensor's dtype, for both backends' operations
// (core/cpu/<family>_cpu.cc, core/cuda/<family>_cuda.cu) and the CPU communicators' reductions:
// one switch and one message.
#pragma once

#include <cstdint>
#include <string>

#include "core/kernels/bf16_math.h"
#include "core/status.h"
#include "core/tensor.h"

namespace mtnlg {

// The dtypes a dispatch takes: kFloating, the backends' operations (f32, f64, bf16, f16);
// kWide, f32 and f64 only (the CPU's fp32 GEMM fallback and AdamW, which a bf16/fp16 model runs
// on its fp32 masters); kFloatingAndI32, what the CPU communicators move and reduce (token ids
// too).
enum class DTypeSet { kFloating, kWide, kFloatingAndI32 };

// Calls f(T{}) with T = float, double, Bf16, F16 or int32_t for `dtype`: the storage type;
// kernels compute in acc_t<T>. A dtype outside kSet is Code::kUnsupported naming the operation,
// the device and the dtypes it takes.
template <DTypeSet kSet = DTypeSet::kFloating, typename F>
void dispatch_dtype(Device device, DType dtype, const char* op, F&& f) {
  constexpr bool kNarrow = kSet != DTypeSet::kWide;
  switch (dtype) {
    case DType::kF32:
      f(float{});
      return;
    case DType::kF64:
      f(double{});
      return;
    case DType::kBF16:
      if constexpr (kNarrow) {
        f(Bf16{});
        return;
      }
      break;
    case DType::kF16:
      if constexpr (kNarrow) {
        f(F16{});
        return;
      }
      break;
    case DType::kI32:
      if constexpr (kSet == DTypeSet::kFloatingAndI32) {
        f(int32_t{});
        return;
      }
      break;
    default:
      break;
  }
  const char* takes = kSet == DTypeSet::kWide
                          ? "f32 and f64 (a bf16/fp16 model updates its fp32 masters)"
                      : kSet == DTypeSet::kFloating ? "f32, f64, bf16 and f16"
                                                    : "f32, f64, bf16, f16 and i32";
  throw unsupported(std::string(op) + " on " + device_name(device) + " supports " + takes +
                        ", not " + dtype_name(dtype),
                    op);
}

}  // namespace mtnlg
