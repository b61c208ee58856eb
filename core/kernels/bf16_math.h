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

}  // namespace mtnlg
