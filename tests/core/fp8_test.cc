// FP8 casts (core/kernels/fp8_math.h) against the grid decoded from all 256 bytes of each format,
// nearest with ties to the even byte, saturating; per-tensor scaling as Transformer Engine's
// delayed and current recipes define it (core/fp8_scaling.h), worked by hand; the emulated FP8
// GEMM's error within the formats' rounding.
#include "core/fp8_scaling.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/status.h"

namespace mtnlg {
namespace {

struct Grid {
  std::vector<float> values;   // the finite non-negative values, ascending
  std::vector<uint8_t> bytes;  // their bytes
};

Grid grid_of(Fp8Format f) {
  Grid g;
  std::vector<std::pair<float, uint8_t>> v;
  for (int b = 0; b < 128; ++b) {  // the non-negative half
    const float x = fp8_decode(static_cast<uint8_t>(b), f);
    if (std::isfinite(x)) v.emplace_back(x, static_cast<uint8_t>(b));
  }
  std::sort(v.begin(), v.end());
  for (const auto& [x, b] : v) {
    g.values.push_back(x);
    g.bytes.push_back(b);
  }
  return g;
}

// The reference: the nearest grid value, a tie to the even byte, beyond the largest the largest.
float nearest(const Grid& g, float x) {
  if (std::isnan(x)) return x;
  const float a = std::fabs(x);
  if (a >= g.values.back()) return std::copysign(g.values.back(), x);
  const auto hi =
      static_cast<size_t>(std::lower_bound(g.values.begin(), g.values.end(), a) - g.values.begin());
  if (g.values[hi] == a) return std::copysign(a, x);
  const size_t lo = hi - 1;
  const double dlo = static_cast<double>(a) - g.values[lo],
               dhi = g.values[hi] - static_cast<double>(a);
  size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (g.bytes[lo] % 2 == 0 ? lo : hi);
  return std::copysign(g.values[pick], x);
}

TEST_CASE("FP8 grids: the values every byte stands for") {
  const Grid e4 = grid_of(Fp8Format::kE4M3), e5 = grid_of(Fp8Format::kE5M2);
  CHECK(e4.values.size() == 127);  // 0x00..0x7E; 0x7F is NaN
  CHECK(e5.values.size() == 124);  // 0x00..0x7B; 0x7C infinity, 0x7D..0x7F NaN
  CHECK(e4.values.back() == 448.0f);
  CHECK(e5.values.back() == 57344.0f);
  CHECK(e4.values[1] == std::ldexp(1.0f, -9));
  CHECK(e5.values[1] == std::ldexp(1.0f, -16));
  CHECK(std::isnan(fp8_decode(0x7F, Fp8Format::kE4M3)));
  CHECK(std::isnan(fp8_decode(0xFF, Fp8Format::kE4M3)));
  CHECK(fp8_decode(0x7C, Fp8Format::kE5M2) == std::numeric_limits<float>::infinity());
  CHECK(fp8_decode(0xFC, Fp8Format::kE5M2) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(fp8_decode(0x7D, Fp8Format::kE5M2)));
  for (const Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2})
    for (int b = 0; b < 256; ++b) {
      const float x = fp8_decode(static_cast<uint8_t>(b), f);
      if (!std::isfinite(x)) continue;
      INFO("format " << static_cast<int>(f) << " byte " << b);
      CHECK(fp8_round(x, f) == x);  // on the grid already
      CHECK(std::signbit(fp8_round(x, f)) == std::signbit(x));
      CHECK(fp8_encode(x, f) == b);  // -0 keeps its byte too
    }
}

TEST_CASE("FP8 casts round to the nearest, ties to even, and saturate") {
  for (const Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    const Grid g = grid_of(f);
    std::vector<float> xs;
    for (size_t i = 0; i + 1 < g.values.size(); ++i) {
      const float mid = 0.5f * (g.values[i] + g.values[i + 1]);  // exact in float: a tie
      xs.insert(xs.end(),
                {g.values[i], mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)});
    }
    std::mt19937 gen(7);
    std::uniform_real_distribution<float> exponent(-22.0f, 18.0f);
    for (int i = 0; i < 100000; ++i) xs.push_back(std::exp2(exponent(gen)));
    xs.insert(xs.end(), {0.0f, 1e-30f, 1e30f, std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::max(), fp8_max(f) * 1.03f});
    for (float x : xs)
      for (const float s : {1.0f, -1.0f}) {
        const float v = s * x, want = nearest(g, v), got = fp8_round(v, f);
        INFO("format " << static_cast<int>(f) << " x " << v << " want " << want << " got " << got);
        REQUIRE(got == want);
        REQUIRE(std::signbit(got) == std::signbit(want));
        REQUIRE(fp8_decode(fp8_encode(v, f), f) == want);
      }
    CHECK(std::isnan(fp8_round(NAN, f)));
    CHECK(std::isnan(fp8_decode(fp8_encode(NAN, f), f)));
    CHECK(fp8_round(-std::numeric_limits<float>::infinity(), f) == -fp8_max(f));
  }
}

TEST_CASE("fp8_round_bits (the CPU's cast) equals fp8_round") {
  // Every sign and float exponent, every kept mantissa pattern, and the dropped bits at and
  // around the rounding point (a tie, one below, one above), at zero and all ones, and at random.
  std::mt19937 gen(11);
  for (const Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    const int shift = 23 - fp8_mantissa_bits(f);
    const uint32_t half = 1u << (shift - 1), low_mask = (1u << shift) - 1;
    int64_t checked = 0;
    for (uint32_t sign = 0; sign < 2; ++sign)
      for (uint32_t e = 0; e < 256; ++e)
        for (uint32_t kept = 0; kept < (1u << (23 - shift)); ++kept) {
          std::vector<uint32_t> lows = {0, 1, half - 1, half, half + 1, low_mask};
          for (int i = 0; i < 64; ++i) lows.push_back(gen() & low_mask);
          for (const uint32_t low : lows) {
            const uint32_t bits = (sign << 31) | (e << 23) | (kept << shift) | low;
            float x = 0.0f;
            std::memcpy(&x, &bits, 4);
            const float want = fp8_round(x, f), got = fp8_round_bits(x, f);
            if (std::isnan(want)) {
              REQUIRE(std::isnan(got));
              continue;
            }
            INFO("format " << static_cast<int>(f) << " bits " << std::hex << bits);
            REQUIRE(got == want);
            REQUIRE(std::signbit(got) == std::signbit(want));
            ++checked;
          }
        }
    CHECK(checked > 100000);
  }
}

// A device accumulates amaxes as integer maxima of their bits (Backend::fp8_cast_accumulate):
// that must order as the magnitudes do, with NaN above infinity, and give each value back.
TEST_CASE("amax bits order as the magnitudes and decode to them") {
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> exponent(-140.0f, 127.0f);
  std::vector<float> v = {0.0f, 1e-45f, 1.0f, 448.0f, 3.4e38f, INFINITY};
  for (int i = 0; i < 2000; ++i) v.push_back(std::exp2(exponent(gen)));
  for (const float a : v) {
    CHECK(fp8_amax_from_bits(fp8_amax_bits(a)) == a);
    CHECK(fp8_amax_bits(-a) == fp8_amax_bits(a));  // a magnitude
    CHECK(fp8_amax_bits(NAN) > fp8_amax_bits(a));
  }
  for (size_t i = 1; i < v.size(); ++i)
    CHECK((fp8_amax_bits(v[i - 1]) < fp8_amax_bits(v[i])) == (v[i - 1] < v[i]));
  CHECK(std::isnan(fp8_amax_from_bits(fp8_amax_bits(NAN))));
  CHECK(std::isnan(fp8_amax_from_bits(0x7F800001u)));  // any NaN's bits
}

TEST_CASE("delayed scaling: the next scale from the window of amaxes, as TE rolls it") {
  Fp8Options o;
  o.amax_history_len = 4;
  Fp8TensorScaling s(Fp8Format::kE4M3, o);
  CHECK(s.scale() == 1.0f);
  // Amaxes 2, 8, 1, 1, 1, 1: the window of 4 keeps the 8 for steps 2-5.
  const std::vector<float> amax = {2, 8, 1, 1, 1, 1}, want = {224, 56, 56, 56, 56, 448};
  for (size_t i = 0; i < amax.size(); ++i) {
    s.record(amax[i] / 2);  // two casts a step: the step's largest counts
    s.record(amax[i]);
    s.update();
    INFO("step " << i + 1);
    CHECK(s.scale() == want[i]);
    CHECK(s.scale_inv() == 1.0f / want[i]);
    CHECK(s.history()[0] == 0.0f);
  }
  o.amax_algo = Fp8AmaxAlgo::kMostRecent;
  Fp8TensorScaling recent(Fp8Format::kE4M3, o);
  for (const float a : {2.0f, 8.0f, 1.0f}) {
    recent.record(a);
    recent.update();
  }
  CHECK(recent.scale() == 448.0f);
  // margin 2: a quarter; E5M2's larger range; an all-zero or NaN step keeps the scale.
  o.amax_algo = Fp8AmaxAlgo::kMax;
  o.margin = 2;
  o.amax_history_len = 1;
  Fp8TensorScaling g(Fp8Format::kE5M2, o);
  g.record(4.0f);
  g.update();
  CHECK(g.scale() == 57344.0f / 4 / 4);
  g.update();  // nothing recorded: amax 0
  CHECK(g.scale() == 57344.0f / 16);
  g.record(NAN);
  g.record(1.0f);  // NaN sticks for the step
  CHECK(std::isnan(g.history()[0]));
  g.update();
  CHECK(g.scale() == 57344.0f / 16);
  // Current scaling: from the tensor's own amax (model/fp8_linear.cc calls fp8_scale_for).
  CHECK(fp8_scale_for(3.5f, Fp8Format::kE4M3, 0, 1.0f) == 128.0f);
  CHECK(fp8_scale_for(0.0f, Fp8Format::kE4M3, 0, 128.0f) == 128.0f);  // all zero: the fallback
}

TEST_CASE("FP8 scaling state round-trips bit for bit and refuses other settings") {
  Fp8Options o;
  o.amax_history_len = 16;
  Fp8TensorScaling a(Fp8Format::kE5M2, o), b(Fp8Format::kE5M2, o);
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(0.0f, 50.0f);
  for (int i = 0; i < 37; ++i) {
    a.record(u(gen));
    a.update();
  }
  a.record(u(gen));  // mid-step: slot 0 holds this step's amax so far
  b.deserialize(a.serialize(), "ckpt/fp8");
  CHECK(b.serialize() == a.serialize());
  CHECK(b.scale() == a.scale());
  a.update();
  b.update();
  CHECK(b.scale() == a.scale());
  Fp8Options other = o;
  other.amax_history_len = 8;
  Fp8TensorScaling c(Fp8Format::kE5M2, other);
  CHECK_THROWS_WITH(
      c.deserialize(a.serialize(), "ckpt/fp8"),
      Catch::Contains("amax_history_len 16 against 8") && Catch::Contains("ckpt/fp8"));
  Fp8TensorScaling d(Fp8Format::kE4M3, o);
  CHECK_THROWS_AS(d.deserialize(a.serialize(), "x"), Error);
  const std::string bytes = a.serialize();
  try {
    b.deserialize(bytes.substr(0, bytes.size() - 3), "ckpt/fp8");
    FAIL("a truncated state was taken");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kCorruption);
  }
}

TEST_CASE("an emulated FP8 GEMM is the product within the formats' rounding") {
  // C = (q(A sa) q(B sb)) / (sa sb), q E4M3, against float64: each operand carries a relative
  // error of at most 2^-4 (half E4M3's step of 2^-3), so |error| <= (2^-4 + 2^-4 + 2^-8) sum |a b|.
  const int m = 8, k = 64, n = 5;
  std::mt19937 gen(11);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> a(m * k), b(k * n), qa(a.size()), qb(b.size());
  for (float& x : a) x = d(gen);
  for (float& x : b) x = d(gen) * 1e-3f;  // a small-valued operand: the scale brings it up
  float amax_a = 0, amax_b = 0;
  for (const float x : a) amax_a = std::max(amax_a, std::fabs(x));
  for (const float x : b) amax_b = std::max(amax_b, std::fabs(x));
  const float sa = fp8_scale_for(amax_a, Fp8Format::kE4M3, 0, 1.0f),
              sb = fp8_scale_for(amax_b, Fp8Format::kE4M3, 0, 1.0f);
  CHECK(fp8_quantize(a.data(), qa.data(), m * k, sa, Fp8Format::kE4M3) == amax_a);
  CHECK(fp8_quantize(b.data(), qb.data(), k * n, sb, Fp8Format::kE4M3) == amax_b);
  double worst = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double exact = 0, mag = 0, emul = 0;
      for (int t = 0; t < k; ++t) {
        exact += static_cast<double>(a[i * k + t]) * b[t * n + j];
        mag += std::fabs(static_cast<double>(a[i * k + t]) * b[t * n + j]);
        emul += static_cast<double>(qa[i * k + t]) * qb[t * n + j];
      }
      emul *= static_cast<double>(1.0f / sa) * (1.0f / sb);
      worst = std::max(worst, std::fabs(emul - exact) / mag);
    }
  INFO("worst error over sum |a b|: " << worst);
  CHECK(worst <= 0.0625 + 0.0625 + 0.004);
  CHECK(worst > 0.0);  // it did round
}

}  // namespace
}  // namespace mtnlg
