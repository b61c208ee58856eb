#include "data/tasks/python_random.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_set>

#include "core/status.h"

namespace mtnlg::tasks {

namespace {
constexpr int kN = 624, kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU, kUpperMask = 0x80000000U, kLowerMask = 0x7fffffffU;
}  // namespace

PythonRandom::PythonRandom(uint64_t seed) {
  // CPython: the seed's absolute value as 32-bit words, least significant first; 0 is one word.
  std::vector<uint32_t> key;
  do {
    key.push_back(static_cast<uint32_t>(seed));
    seed >>= 32;
  } while (seed != 0);
  init_by_array(key);
}

void PythonRandom::init_genrand(uint32_t s) {
  mt_[0] = s;
  for (mti_ = 1; mti_ < kN; ++mti_)
    mt_[static_cast<size_t>(mti_)] = 1812433253U * (mt_[static_cast<size_t>(mti_ - 1)] ^
                                                    (mt_[static_cast<size_t>(mti_ - 1)] >> 30)) +
                                     static_cast<uint32_t>(mti_);
}

void PythonRandom::init_by_array(const std::vector<uint32_t>& key) {
  init_genrand(19650218U);
  size_t i = 1, j = 0;
  const size_t len = key.size();
  for (size_t k = std::max<size_t>(kN, len); k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525U)) + key[j] +
             static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= len) j = 0;
  }
  for (size_t k = kN - 1; k > 0; --k) {
    mt_[i] =
        (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941U)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000U;  // the most significant bit set: a non-zero initial array
  mti_ = kN;
}

uint32_t PythonRandom::genrand_uint32() {
  if (mti_ >= kN) {
    int kk = 0;
    const auto mag = [](uint32_t y) { return (y & 1U) ? kMatrixA : 0U; };
    for (; kk < kN - kM; ++kk) {
      const uint32_t y = (mt_[static_cast<size_t>(kk)] & kUpperMask) |
                         (mt_[static_cast<size_t>(kk + 1)] & kLowerMask);
      mt_[static_cast<size_t>(kk)] = mt_[static_cast<size_t>(kk + kM)] ^ (y >> 1) ^ mag(y);
    }
    for (; kk < kN - 1; ++kk) {
      const uint32_t y = (mt_[static_cast<size_t>(kk)] & kUpperMask) |
                         (mt_[static_cast<size_t>(kk + 1)] & kLowerMask);
      mt_[static_cast<size_t>(kk)] = mt_[static_cast<size_t>(kk + (kM - kN))] ^ (y >> 1) ^ mag(y);
    }
    const uint32_t y = (mt_[kN - 1] & kUpperMask) | (mt_[0] & kLowerMask);
    mt_[kN - 1] = mt_[kM - 1] ^ (y >> 1) ^ mag(y);
    mti_ = 0;
  }
  uint32_t y = mt_[static_cast<size_t>(mti_++)];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= (y >> 18);
  return y;
}

double PythonRandom::random() {
  const uint32_t a = genrand_uint32() >> 5, b = genrand_uint32() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

uint64_t PythonRandom::getrandbits(int k) {
  if (k <= 32) return genrand_uint32() >> (32 - k);
  // CPython fills 32-bit words least significant first, the last one cut to what remains.
  const uint64_t low = genrand_uint32();
  const uint64_t high = genrand_uint32() >> (64 - k);
  return low | (high << 32);
}

uint64_t PythonRandom::randbelow(uint64_t n) {
  int k = 0;
  while (k < 64 && (n >> k) != 0) ++k;  // n.bit_length()
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return r;
}

std::vector<int64_t> PythonRandom::sample(int64_t n, int64_t k) {
  if (k < 0 || k > n)
    throw invalid_argument("sample of " + std::to_string(k) + " from a population of " +
                               std::to_string(n) + ": larger than the population",
                           "few-shot sampling");
  std::vector<int64_t> result(static_cast<size_t>(k));
  int64_t setsize = 21;  // a small set's size minus an empty list's, in CPython's words
  if (k > 5)
    setsize += static_cast<int64_t>(
        std::pow(4.0, std::ceil(std::log(static_cast<double>(k * 3)) / std::log(4.0))));
  if (n <= setsize) {
    std::vector<int64_t> pool(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pool[static_cast<size_t>(i)] = i;
    for (int64_t i = 0; i < k; ++i) {
      const auto j = static_cast<size_t>(randbelow(static_cast<uint64_t>(n - i)));
      result[static_cast<size_t>(i)] = pool[j];
      pool[j] = pool[static_cast<size_t>(n - i - 1)];
    }
  } else {
    std::unordered_set<int64_t> selected;
    for (int64_t i = 0; i < k; ++i) {
      auto j = static_cast<int64_t>(randbelow(static_cast<uint64_t>(n)));
      while (selected.count(j) != 0) j = static_cast<int64_t>(randbelow(static_cast<uint64_t>(n)));
      selected.insert(j);
      result[static_cast<size_t>(i)] = j;
    }
  }
  return result;
}

}  // namespace mtnlg::tasks
