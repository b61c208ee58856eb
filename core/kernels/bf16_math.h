// bfloat16 <-> float, per element, shared by the CPU and CUDA code: bf16 is the top 16 bits of
// an IEEE float (8 exponent bits, 7 mantissa bits), rounded to nearest-even as the hardware
// (AVX512-BF16 vcvtneps2bf16, CUDA __float2bfloat16_rn) does. Unit roundoff 2^-8.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/hostdevice.h"

namespace mtnlg {

MTNLG_HD float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

MTNLG_HD uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then truncate.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// A bf16 element as stored in a tensor. It converts to float implicitly and is built from a
// float by rounding (nearest even), so one kernel template serves float, double and bf16: it
// reads elements as T, computes in acc_t<T> (float for bf16) and rounds once when it writes.
struct Bf16 {
  uint16_t bits;
  Bf16() = default;
  MTNLG_HD Bf16(float f) : bits(f32_to_bf16(f)) {}  // NOLINT: implicit by design (see above)
  MTNLG_HD operator float() const { return bf16_to_f32(bits); }
};
static_assert(sizeof(Bf16) == 2, "Bf16 is stored as two bytes");

// The type a kernel computes in for storage type T: float for bf16, T otherwise.
template <typename T>
struct AccType {
  using type = T;
};
template <>
struct AccType<Bf16> {
  using type = float;
};
template <typename T>
using acc_t = typename AccType<T>::type;

}  // namespace mtnlg
