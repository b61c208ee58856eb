// FP8 casts on the CPU (Backend::abs_max, Backend::fp8_cast): the emulation of precision: fp8.
// Each value is scaled and rounded by fp8_round_bits (core/kernels/fp8_math.h: fp8_round, the
// definition of the formats' rounding, by integer operations); the result is stored as f32 or bf16,
// both exact for every FP8 value. Threads take fixed blocks and the maximum is order-free, so the
// results do not depend on the thread count.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/cpu/cpu_backend.h"
#include "core/cpu/kernels_cpu.h"
#include "core/dtype_dispatch.h"

namespace mtnlg {
namespace {

// |x| as the bits of a float: for non-negative floats the integer order is the numeric order,
// and every NaN is above infinity's 0x7F800000, so the largest is one vectorized integer maximum.
inline uint32_t abs_bits(float v) {
  uint32_t u = 0;
  std::memcpy(&u, &v, 4);
  return u & 0x7FFFFFFFu;
}
inline uint32_t abs_bits(Bf16 v) {
  return (static_cast<uint32_t>(v.bits) << 16) & 0x7FFFFFFFu;
}
template <typename T>
uint32_t abs_bits(T v) {
  return abs_bits(static_cast<float>(v));
}

template <typename T>
double abs_max_checked(const T* x, int64_t n) {
  uint32_t m = 0;
#pragma omp parallel for schedule(static) if (n >= cpu::kElemBlock) reduction(max : m)
  for (int64_t b = 0; b < n; b += cpu::kElemBlock) {
    const int64_t e = std::min(n, b + cpu::kElemBlock);
    uint32_t block = 0;
    for (int64_t i = b; i < e; ++i) block = std::max(block, abs_bits(x[i]));
    m = std::max(m, block);
  }
  if (m > 0x7F800000u) return NAN;
  float f = 0.0f;
  std::memcpy(&f, &m, 4);
  return f;
}

// The format a compile-time constant, so that fp8_round_bits folds to a few vector operations.
// Every FP8 value is a bf16 value: a bf16 output is the float's upper half, no rounding.
template <Fp8Format kFormat, typename T, typename Out>
void cast(Out* out, const T* in, int64_t n, float scale) {
#pragma omp parallel for schedule(static) if (n >= cpu::kElemBlock)
  for (int64_t b = 0; b < n; b += cpu::kElemBlock) {
    const int64_t e = std::min(n, b + cpu::kElemBlock);
    for (int64_t i = b; i < e; ++i) {
      const float q = fp8_round_bits(static_cast<float>(in[i]) * scale, kFormat);
      if constexpr (std::is_same_v<Out, Bf16>) {
        uint32_t u = 0;
        std::memcpy(&u, &q, 4);
        out[i].bits = static_cast<uint16_t>(u >> 16);
      } else {
        out[i] = q;
      }
    }
  }
}

template <typename T, typename Out>
void cast(Out* out, const T* in, int64_t n, float scale, Fp8Format format) {
  if (format == Fp8Format::kE4M3) {
    cast<Fp8Format::kE4M3>(out, in, n, scale);
  } else {
    cast<Fp8Format::kE5M2>(out, in, n, scale);
  }
}

}  // namespace

double CpuBackend::do_abs_max(const Tensor& x) {
  enter();
  double result = 0.0;
  dispatch_dtype(Device::kCPU, x.dtype(), "abs_max", [&](auto z) {
    using T = decltype(z);
    result = abs_max_checked(x.data_as<T>(), x.numel());
  });
  return result;
}

double CpuBackend::do_fp8_cast(Tensor& out, const Tensor& in, double scale, Fp8Format format) {
  enter();
  guard_write(out, "fp8_cast");
  double amax = 0.0;
  const auto s = static_cast<float>(scale);
  dispatch_dtype(Device::kCPU, in.dtype(), "fp8_cast", [&](auto z) {
    using T = decltype(z);
    const T* src = in.data_as<T>();
    // The maximum first: out may alias in.
    amax = abs_max_checked(src, in.numel());
    if (out.dtype() == DType::kBF16) {
      cast(out.data_as<Bf16>(), src, in.numel(), s, format);
    } else {
      cast(out.data_as<float>(), src, in.numel(), s, format);
    }
  });
  return amax;
}

}  // namespace mtnlg
