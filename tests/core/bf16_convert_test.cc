// The CPU kernels' vector bf16 conversions (core/cpu/kernels_cpu.h: narrow, round_to_bf16, widen)
// against the scalar reference (f32_to_bf16_portable, bf16_to_f32) on every one of the 2^32 float
// bit patterns: rounding to nearest even, carries into the exponent, infinities, NaNs kept quiet,
// subnormals and both zeros. Each chunk's length is odd, so the scalar tails run too.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/cpu/kernels_cpu.h"
#include "core/kernels/bf16_math.h"

using namespace mtnlg;

namespace {

constexpr int64_t kChunk = (int64_t{1} << 20) + 7;  // odd: vector bodies and scalar tails both run

// Fills f with the bit patterns [first, first + n) (wrapping past 2^32 - 1).
void fill_bits(std::vector<float>& f, uint64_t first) {
  for (size_t i = 0; i < f.size(); ++i) {
    const auto bits = static_cast<uint32_t>(first + i);
    std::memcpy(&f[i], &bits, 4);
  }
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

}  // namespace

TEST_CASE("narrow and round_to_bf16 round every float as f32_to_bf16 does") {
  std::vector<float> src(kChunk), round_trip(kChunk);
  std::vector<Bf16> narrowed(kChunk);
  int64_t narrow_wrong = 0, round_wrong = 0, first_wrong = -1;
  for (uint64_t first = 0; first < (uint64_t{1} << 32); first += kChunk) {
    fill_bits(src, first);
    cpu::narrow(narrowed.data(), src.data(), kChunk);
    cpu::round_to_bf16(round_trip.data(), src.data(), kChunk);
    for (int64_t i = 0; i < kChunk; ++i) {
      const uint16_t want = f32_to_bf16_portable(src[i]);
      const bool bad_narrow = narrowed[i].bits != want;
      const bool bad_round = bits_of(round_trip[i]) != static_cast<uint32_t>(want) << 16;
      narrow_wrong += bad_narrow;
      round_wrong += bad_round;
      if ((bad_narrow || bad_round) && first_wrong < 0) first_wrong = bits_of(src[i]);
    }
  }
  INFO("first wrong input bits: " << first_wrong);
  CHECK(narrow_wrong == 0);
  CHECK(round_wrong == 0);
}

TEST_CASE("narrow_scaled rounds the fp32 product as Bf16(x * scale)") {
  std::vector<float> src(kChunk);
  std::vector<Bf16> got(kChunk);
  int64_t wrong = 0;
  for (const float scale : {1.0f, 0.37f, -3.0e-5f, 1.7e30f}) {
    fill_bits(src, uint64_t{0x3f000000} - kChunk / 2);  // around 0.5, and the scale's range
    cpu::narrow_scaled(got.data(), src.data(), scale, kChunk);
    for (int64_t i = 0; i < kChunk; ++i)
      wrong += got[i].bits != f32_to_bf16_portable(src[i] * scale);
  }
  CHECK(wrong == 0);
}

TEST_CASE("round_to_bf16 works in place and widen inverts narrow") {
  std::vector<float> x = {1.0f,   1.00390625f, 1.01171875f, -2.5f,    3.0e38f, 1e-40f,
                          -0.0f,  65504.0f,    0.1f,        -7.3f,    1e-3f,   12345.678f,
                          -1e30f, 2.0f,        0.5f,        3.14159f, 2.71828f};
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = bf16_to_f32(f32_to_bf16_portable(x[i]));
  std::vector<Bf16> b(x.size());
  cpu::narrow(b.data(), x.data(), static_cast<int64_t>(x.size()));
  std::vector<float> back(x.size());
  cpu::widen(back.data(), b.data(), static_cast<int64_t>(x.size()));
  cpu::round_to_bf16(x.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    CHECK(bits_of(x[i]) == bits_of(want[i]));
    CHECK(bits_of(back[i]) == bits_of(want[i]));
  }
}
