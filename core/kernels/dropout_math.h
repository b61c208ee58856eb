// Dropout per-element math, shared by the CPU and CUDA kernels. Pure functions: thread-safe.
//
// The keep decision for element i is core/rng.h's dropout_keep(stream, i, p); the helpers here
// let a kernel that already holds the element's 32 random bits (one Philox block serves four
// consecutive elements) decide without drawing again. dropout_keep_bits(rng_bits(s, i), p) ==
// dropout_keep(s, i, p) exactly (tests/core/dropout_test.cc checks it).
#pragma once

#include <cstdint>

#include "core/hostdevice.h"
#include "core/rng.h"

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

// The same decision as one integer comparison, for kernels that decide many elements with one
// p: dropout_keep_bits(bits, p) == (bits >= dropout_threshold(p)) for every bits and every p in
// [0, 1). (bits >> 8) * 2^-24 >= p holds exactly when the integer bits >> 8 reaches p * 2^24
// (exact: a power-of-two scaling), rounded up; and bits >> 8 >= n exactly when bits >= n * 256.
// tests/core/dropout_test.cc checks it.
MTNLG_HD uint32_t dropout_threshold(float p) {
  const float scaled = p * 16777216.0f;     // p * 2^24, exact
  auto n = static_cast<uint32_t>(scaled);   // p >= 0: truncation is floor
  if (static_cast<float>(n) < scaled) ++n;  // ceil; n <= 2^24 - 1 for p < 1
  return n << 8;
}

// Keep decisions for element indices of one stream, the same as dropout_keep's. One Philox
// block (ten rounds of 32-bit products) serves four consecutive indices and is kept until an
// index outside it is asked, so a caller that walks indices in order draws once per four
// instead of once per element. Every kernel that drops many elements walks them this way, on
// the CPU and the GPU (a thread's run of consecutive elements).
class KeepMask {
 public:
  // The base word read once here (RngStream::stream_base), not per draw.
  MTNLG_HD KeepMask(RngStream s, float p) : s_(s), p_(p) {
    s_.stream = stream_word(s);
    s_.stream_base = nullptr;
  }
  MTNLG_HD bool keep(uint64_t i) {
    const uint64_t n = s_.offset + i;
    if ((n >> 2) != block_ || !valid_) {
      block_ = n >> 2;
      bits_ = philox4x32_10(s_.seed, s_.stream, block_);
      valid_ = true;
    }
    // The word by selects, not by index: an indexed array would sit in a GPU thread's local
    // memory instead of its registers.
    const uint32_t k = static_cast<uint32_t>(n & 3);
    const uint32_t word =
        k < 2 ? (k == 0 ? bits_.v[0] : bits_.v[1]) : (k == 2 ? bits_.v[2] : bits_.v[3]);
    return dropout_keep_bits(word, p_);
  }

 private:
  RngStream s_;
  float p_;
  uint64_t block_ = 0;
  bool valid_ = false;
  Philox4 bits_{};
};

}  // namespace mtnlg::kernels
