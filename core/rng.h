// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11), as cuRAND and PyTorch use.
//
// A stream is (seed, stream, offset). Element i is a pure function of (seed, stream, offset + i),
// so any device or thread can produce any element without shared state: dropout masks are
// regenerated in backward instead of stored, and splitting per rank later is choosing disjoint
// offsets (or seeds). Everything here is MTNLG_HD so CPU and CUDA draw the same numbers.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/hostdevice.h"

namespace mtnlg {

struct RngStream {
  uint64_t seed = 0;
  uint64_t stream =
      0;  // independent sub-stream (e.g. micro-batch and dropout site); counter high word
  uint64_t offset = 0;  // counter of element 0
  // Where set, a word added to `stream` when the numbers are drawn (in device memory on a GPU):
  // a captured step's dropout replays with the micro-batch's streams written there before each
  // replay (Backend::set_rng_stream_base). Set by the backend, never by callers.
  const uint64_t* stream_base = nullptr;
};

// The counter's high word a stream draws with: its sub-stream plus the base word, if any.
MTNLG_HD uint64_t stream_word(const RngStream& s) {
  return s.stream_base != nullptr ? s.stream + *s.stream_base : s.stream;
}

struct Philox4 {
  uint32_t v[4];
};

MTNLG_HD Philox4 philox4x32_10(uint64_t key64, uint64_t counter_hi, uint64_t counter_lo) {
  uint32_t k0 = static_cast<uint32_t>(key64), k1 = static_cast<uint32_t>(key64 >> 32);
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// 32 random bits for element i of a stream: one Philox block yields four elements.
MTNLG_HD uint32_t rng_bits(RngStream s, uint64_t i) {
  const uint64_t n = s.offset + i;
  const Philox4 r = philox4x32_10(s.seed, stream_word(s), n >> 2);
  return r.v[n & 3];
}

// Uniform in [0, 1) with 24 bits of resolution.
MTNLG_HD float rng_uniform(RngStream s, uint64_t i) {
  return static_cast<float>(rng_bits(s, i) >> 8) * (1.0f / 16777216.0f);
}

// Standard normal for element i (Box-Muller on two 32-bit draws of one Philox block).
MTNLG_HD double rng_normal(RngStream s, uint64_t i) {
  // Another key than rng_bits' so normal and uniform draws of one stream are independent.
  const Philox4 r = philox4x32_10(s.seed ^ 0x6A09E667F3BCC909ull, stream_word(s), s.offset + i);
  const double u1 = (static_cast<double>(r.v[0]) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
  const double u2 = static_cast<double>(r.v[1]) * (1.0 / 4294967296.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Dropout keeps element i of stream s when its uniform draw is >= p.
MTNLG_HD bool dropout_keep(RngStream s, uint64_t i, float p) {
  return rng_uniform(s, i) >= p;
}

}  // namespace mtnlg
