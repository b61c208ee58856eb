// Dropout per-element math, shared by the CPU and CUDA kernels. Pure functions: thread-safe.
//
// The keep decision for element i is core/rng.h's dropout_keep(stream, i, p); the helpers here
// let a kernel that already holds the element's 32 random bits (one Philox block serves four
// consecutive elements) decide without drawing again. dropout_keep_bits(rng_bits(s, i), p) ==
// dropout_keep(s, i, p) exactly (tests/core/dropout_test.cc checks it).
#pragma once

#include <cstdint>

#include "core/hostdevice.h"

namespace mtnlg::kernels {

// Kept elements are scaled by 1 / (1 - p) so the expectation is unchanged. p must be < 1.
template <typename T>
MTNLG_HD T dropout_scale(T p) {
  return T(1) / (T(1) - p);
}

// Same arithmetic as rng_uniform(s, i) >= p in core/rng.h.
MTNLG_HD bool dropout_keep_bits(uint32_t bits, float p) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f) >= p;
}

}  // namespace mtnlg::kernels
