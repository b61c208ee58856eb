// bfloat16 (and fp16) <-> float, per element, shared by the CPU and CUDA code: bf16 is the top 16
// bits of an IEEE float (8 exponent bits, 7 mantissa bits), rounded to nearest-even as the hardware
// (AVX512-BF16 vcvtneps2bf16, CUDA __float2bfloat16_rn) does. Unit roundoff 2^-8.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/hostdevice.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace mtnlg {

MTNLG_HD float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

MTNLG_HD uint16_t f32_to_bf16_portable(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN stays a (quiet) NaN
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit, then truncate.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// The conversions below are portable bit code (the host's, and the reference); CUDA device
// code takes the hardware's, which rounds identically (NaN payloads aside).
MTNLG_HD uint16_t f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  return f32_to_bf16_portable(f);
#endif
}

// IEEE binary16 (fp16: 5 exponent bits, 10 mantissa bits, max 65504) <-> float, rounded to
// nearest even as F16C vcvtps2ph and CUDA __float2half_rn do; subnormals kept. Unit roundoff
// 2^-11.
MTNLG_HD float f16_to_f32_portable(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu, bits;
  if (e == 0x1fu) {
    bits = sign | 0x7f800000u | (m << 13);  // inf, NaN (payload kept)
  } else if (e != 0) {
    bits = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m == 0) {
    bits = sign;
  } else {  // subnormal m * 2^-24: normalise
    uint32_t shift = 0;
    while (!(m & 0x400u)) {
      m <<= 1;
      ++shift;
    }
    bits = sign | ((113u - shift) << 23) | ((m & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

MTNLG_HD float f16_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return f16_to_f32_portable(h);
#endif
}

MTNLG_HD uint16_t f32_to_f16_portable(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint32_t sign = (x >> 16) & 0x8000u, abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf, or NaN kept quiet
    return static_cast<uint16_t>(sign | 0x7c00u |
                                 (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (abs < 0x38800000u) {  // below 2^-14: a subnormal half or zero
    if (abs <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 rounds to zero
    const uint32_t e = abs >> 23, m = (abs & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t h = abs - 0x38000000u;  // exponent rebiased 127 -> 15
  const uint32_t rem = h & 0x1fffu;
  h >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

MTNLG_HD uint16_t f32_to_f16(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  return f32_to_f16_portable(f);
#endif
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

// An fp16 element as stored in a tensor; as Bf16.
struct F16 {
  uint16_t bits;
  F16() = default;
  MTNLG_HD F16(float f) : bits(f32_to_f16(f)) {}  // NOLINT: implicit by design (see Bf16)
  MTNLG_HD operator float() const { return f16_to_f32(bits); }
};
static_assert(sizeof(F16) == 2, "F16 is stored as two bytes");

// The type a kernel computes in for storage type T: float for bf16 and fp16, T otherwise.
template <typename T>
struct AccType {
  using type = T;
};
template <>
struct AccType<Bf16> {
  using type = float;
};
template <>
struct AccType<F16> {
  using type = float;
};
template <typename T>
using acc_t = typename AccType<T>::type;

}  // namespace mtnlg
