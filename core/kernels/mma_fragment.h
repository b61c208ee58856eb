// Register fragments of the tensor-core product mma.sync.m16n8k16 (bf16 or fp16 in, fp32
// accumulate; sm_80 and later): which elements each of a warp's 32 lanes holds. Written once
// for the kernels that build fragments by hand (core/kernels/flash2_forward.h) and for the CPU
// emulator that runs them (tests/core/simt_emulator.h), from the PTX ISA's "Matrix Fragments
// for mma.m16n8k16" tables. With g = lane / 4 and t = lane % 4:
//   A (16 x 16, row-major), four 32-bit registers of two elements each, element e in [0, 8):
//     register e / 2, half e % 2 (the lower-indexed element in the low 16 bits);
//     row g + 8 * (register % 2), column 2t + half + 8 * (register / 2).
//   B (16 x 8, k x n), two registers, element e in [0, 4): k = 2t + half + 8 * register, n = g.
//   C and D (16 x 8, fp32), four floats, element e in [0, 4): row g + 8 * (e / 2), col 2t + e % 2.
// So the accumulator of one 16 x 8 product and the next, side by side, hold exactly an A
// fragment's elements for the 16 x 16 block they form: the FA2 kernels hand a tile of
// probabilities from one product to the next without shared memory.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/hostdevice.h"

namespace mtnlg::kernels::mma {

struct Coord {
  int row, col;
};

MTNLG_HD Coord a_element(int lane, int e) {
  const int g = lane >> 2, t = lane & 3, reg = e >> 1, half = e & 1;
  return {g + 8 * (reg & 1), 2 * t + half + 8 * (reg >> 1)};
}
MTNLG_HD Coord b_element(int lane, int e) {  // {k, n}
  const int g = lane >> 2, t = lane & 3, reg = e >> 1, half = e & 1;
  return {2 * t + half + 8 * reg, g};
}
MTNLG_HD Coord c_element(int lane, int e) {
  const int g = lane >> 2, t = lane & 3;
  return {g + 8 * (e >> 1), 2 * t + (e & 1)};
}

// Two 16-bit elements in one register, the lower-indexed one in the low half.
MTNLG_HD uint32_t pack(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}
MTNLG_HD uint16_t low(uint32_t r) {
  return static_cast<uint16_t>(r & 0xffffu);
}
MTNLG_HD uint16_t high(uint32_t r) {
  return static_cast<uint16_t>(r >> 16);
}

// Two consecutive 16-bit elements at p (4-byte aligned) as one register, and back.
template <typename T>
MTNLG_HD uint32_t load_pair(const T* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t r;
  std::memcpy(&r, static_cast<const void*>(p), sizeof r);
  return r;
#endif
}
template <typename T>
MTNLG_HD void store_pair(T* p, uint32_t r) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint32_t*>(p) = r;
#else
  std::memcpy(static_cast<void*>(p), &r, sizeof r);
#endif
}

}  // namespace mtnlg::kernels::mma
