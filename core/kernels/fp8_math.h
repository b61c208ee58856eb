// FP8 numbers as Hopper's tensor cores, cuBLASLt and Transformer Engine take them (OCP FP8):
//   E4M3  1 sign, 4 exponent (bias 7), 3 mantissa bits; normals 2^-6 .. 448, subnormals in steps
//         of 2^-9; no infinities, S.1111.111 is NaN. The forward's format (weights, activations).
//   E5M2  1 sign, 5 exponent (bias 15), 2 mantissa bits; normals 2^-14 .. 57344, subnormals in
//         steps of 2^-16; S.11111.00 infinity, S.11111.xx NaN. The backward's in TE's HYBRID.
// A cast rounds to the nearest value (ties to the even mantissa) and saturates: a finite value or
// an infinity beyond the largest finite value becomes it, as CUDA's __NV_SATFINITE conversions
// and TE's casts do; NaN stays NaN.
//
// fp8_round gives the rounded value as a float (the CPU's emulation computes with the FP8 grid's
// values, each exact in float and in bf16); fp8_encode/fp8_decode give the byte a GPU stores.
// The rounding is done in float arithmetic on powers of two (exact): tests/core/fp8_test.cc
// checks it against the grid decoded from all 256 bytes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/hostdevice.h"

namespace mtnlg {

enum class Fp8Format : uint8_t { kE4M3 = 0, kE5M2 = 1 };

MTNLG_HD float fp8_max(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? 448.0f : 57344.0f;
}
MTNLG_HD int fp8_mantissa_bits(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? 3 : 2;
}
// The exponent of the smallest normal: the subnormals' exponent too.
MTNLG_HD int fp8_min_exponent(Fp8Format f) {
  return f == Fp8Format::kE4M3 ? -6 : -14;
}

MTNLG_HD float fp8_round(float x, Fp8Format f) {
  if (std::isnan(x)) return x;
  const float a = std::fabs(x), max = fp8_max(f);
  if (a >= max) return std::copysign(max, x);  // saturating: beyond max rounds to it anyway
  if (a == 0.0f) return x;
  int e = 0;
  (void)std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): the leading bit is 2^(e - 1)
  e -= 1;
  if (e < fp8_min_exponent(f)) e = fp8_min_exponent(f);  // subnormals: a fixed quantum
  const float quantum = std::ldexp(1.0f, e - fp8_mantissa_bits(f));
  // a / quantum is exact (a power of two); rint rounds half to even, as the current mode does.
  return std::copysign(std::rint(a / quantum) * quantum, x);
}

// fp8_round without branches, by integer operations on the float's bits (a CPU vectorizes it:
// the emulation casts every GEMM operand): the same result for every input
// (tests/core/fp8_test.cc checks each exponent, sign and kept mantissa with the dropped bits at
// and around every rounding point).
MTNLG_HD float fp8_round_bits(float x, Fp8Format f) {
  uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  const uint32_t sign = u & 0x80000000u, a = u & 0x7FFFFFFFu;
  const int mbits = fp8_mantissa_bits(f), min_exp = fp8_min_exponent(f), shift = 23 - mbits;
  const float max = fp8_max(f);
  uint32_t max_bits = 0;
  std::memcpy(&max_bits, &max, 4);
  // Normal: the mantissa rounded to mbits bits, ties to even (a carry moves the exponent up).
  const uint32_t normal =
      (a + ((1u << (shift - 1)) - 1) + ((a >> shift) & 1u)) & ~((1u << shift) - 1);
  // Below the smallest normal: multiples of a fixed quantum. Adding 2^23 quanta rounds |x| to
  // one, ties to even (the float's unit there is the quantum), and subtracting them is exact.
  float v = 0.0f;
  std::memcpy(&v, &a, 4);
  const float big = std::ldexp(1.0f, 23 + min_exp - mbits);
  const float sub = (v + big) - big;
  uint32_t sub_bits = 0;
  std::memcpy(&sub_bits, &sub, 4);
  uint32_t r = a < static_cast<uint32_t>(min_exp + 127) << 23 ? sub_bits : normal;
  r = a >= max_bits ? max_bits : r;  // saturating (infinity too)
  r = a > 0x7F800000u ? a : r;       // NaN kept
  r |= sign;
  float out = 0.0f;
  std::memcpy(&out, &r, 4);
  return out;
}

// The byte of a value already on the grid (fp8_round's result), or of NaN.
MTNLG_HD uint8_t fp8_encode_rounded(float v, Fp8Format f) {
  const int mbits = fp8_mantissa_bits(f), bias = f == Fp8Format::kE4M3 ? 7 : 15;
  uint8_t sign = std::signbit(v) ? 0x80 : 0;
  if (std::isnan(v)) return static_cast<uint8_t>(sign | 0x7F);  // NaN in both formats
  const float a = std::fabs(v);
  if (a == 0.0f) return sign;
  int e = 0;
  const float m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1)
  int exp_field = e - 1 + bias;
  if (exp_field <= 0) {  // subnormal: a = k 2^(min_exponent - mbits)
    const auto k = static_cast<int>(std::ldexp(a, mbits - fp8_min_exponent(f)));
    return static_cast<uint8_t>(sign | k);
  }
  const auto frac = static_cast<int>(std::ldexp(m * 2.0f - 1.0f, mbits));
  return static_cast<uint8_t>(sign | (exp_field << mbits) | frac);
}

MTNLG_HD uint8_t fp8_encode(float x, Fp8Format f) {
  return fp8_encode_rounded(fp8_round(x, f), f);
}

MTNLG_HD float fp8_decode(uint8_t b, Fp8Format f) {
  const int mbits = fp8_mantissa_bits(f), ebits = 7 - mbits, bias = f == Fp8Format::kE4M3 ? 7 : 15;
  const int exp_field = (b >> mbits) & ((1 << ebits) - 1), frac = b & ((1 << mbits) - 1);
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (f == Fp8Format::kE4M3 && exp_field == 15 && frac == 7) return NAN;
  if (f == Fp8Format::kE5M2 && exp_field == 31) return frac == 0 ? sign * INFINITY : NAN;
  if (exp_field == 0) return sign * std::ldexp(static_cast<float>(frac), 1 - bias - mbits);
  return sign * std::ldexp(1.0f + std::ldexp(static_cast<float>(frac), -mbits), exp_field - bias);
}

// A magnitude as the bits a device accumulates it in (Backend::fp8_cast_accumulate): a
// non-negative float's bits order as unsigned integers, and any NaN's lie above infinity's, so the
// largest of many is an integer maximum (atomicMax on a GPU), whatever their order.
inline uint32_t fp8_amax_bits(double amax) {
  if (std::isnan(amax)) return 0x7FC00000u;
  const float f = std::fabs(static_cast<float>(amax));
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float fp8_amax_from_bits(uint32_t bits) {
  if (bits > 0x7F800000u) return NAN;
  float f = 0.0f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace mtnlg
