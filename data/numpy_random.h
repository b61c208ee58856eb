// numpy's legacy RandomState(seed), the generator Megatron-LM's dataset indices draw from
// (`numpy.random.RandomState(seed).shuffle` in megatron/core/datasets/gpt_dataset.py), bit for bit:
// MT19937 seeded with Matsumoto and Nishimura's init_genrand (numpy's legacy seeding of an
// integer seed, which std::mt19937's seed() is), and numpy's bounded integers by masked
// rejection (random_interval) for the Fisher-Yates shuffle of a one-dimensional array.
//
// Checked against numpy 1.24 in tests/data/numpy_random_test.cc (RandomState's values and
// shuffles for several seeds and lengths). The 64-bit draw, used only for a bound past 2^32 - 1
// (arrays of more than 4G elements), follows numpy's mt19937_next64 (high word first) and is
// not exercised there.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>

namespace mtnlg {

class NumpyRandomState {
 public:
  // RandomState(seed) for an integer seed in [0, 2^32).
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  uint32_t next_uint32() { return static_cast<uint32_t>(mt_()); }
  uint64_t next_uint64() {
    const uint64_t hi = next_uint32();
    return hi << 32 | next_uint32();
  }

  // Uniform in [0, max]: draws masked to the smallest all-ones mask >= max until one is <= max
  // (numpy's random_interval; 32-bit draws while max fits in 32 bits).
  uint64_t interval(uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    for (int shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
    uint64_t value;
    if (max <= 0xffffffffULL) {
      while ((value = (next_uint32() & mask)) > max) {
      }
    } else {
      while ((value = (next_uint64() & mask)) > max) {
      }
    }
    return value;
  }

  // random_sample(): a 53-bit double in [0, 1) from two draws (27 and 26 bits), as numpy's
  // legacy random_double.
  double next_double() {
    const uint32_t a = next_uint32() >> 5, b = next_uint32() >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
  }
  // pareto(a): the Lomax (Pareto II) draw expm1(E / a), E = -log(1 - random_sample()), as numpy's
  // legacy_pareto and legacy_standard_exponential compute it.
  double pareto(double a) { return std::expm1(-std::log(1.0 - next_double()) / a); }
  // RandomState.shuffle of a one-dimensional array of n elements: for i = n-1 down to 1, swap
  // a[i] with a[interval(i)].
  template <typename T>
  void shuffle(T* a, int64_t n) {
    for (int64_t i = n - 1; i >= 1; --i) {
      const auto j = static_cast<int64_t>(interval(static_cast<uint64_t>(i)));
      std::swap(a[i], a[j]);
    }
  }

 private:
  std::mt19937 mt_;
};

}  // namespace mtnlg
