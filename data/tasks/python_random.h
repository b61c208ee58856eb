// Python's `random.Random`, the parts lm-evaluation-harness draws few-shot examples with
// (its ContextSampler is `Random(1234).sample(docs, n)`, one stream a task, advancing across
// documents), bit for bit: the Mersenne Twister MT19937 seeded from an integer as CPython seeds
// it (init_by_array over the integer's 32-bit words, least significant first), random(),
// getrandbits(k), the rejection sampling of randbelow(n), and sample(population, k) with both of
// its algorithms: a shrinking pool while the population is at most 21 (or, for k > 5,
// 21 + 4^ceil(log4(3k))) items, else draws into a set with rejection of repeats. Results are
// indices into the population, in the order Python returns its items.
//
// Not thread-safe (one generator's state); copyable.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace mtnlg::tasks {

class PythonRandom {
 public:
  // random.Random(seed) for a non-negative seed (Python seeds with its absolute value).
  explicit PythonRandom(uint64_t seed);

  uint32_t genrand_uint32();
  double random();                 // [0, 1), 53 bits
  uint64_t getrandbits(int k);     // 0 < k <= 64
  uint64_t randbelow(uint64_t n);  // [0, n), n > 0
  // random.sample(range(n), k): k distinct indices in [0, n). Throws invalid_argument when
  // k > n (Python's "Sample larger than population or is negative").
  std::vector<int64_t> sample(int64_t n, int64_t k);

 private:
  void init_genrand(uint32_t s);
  void init_by_array(const std::vector<uint32_t>& key);
  std::array<uint32_t, 624> mt_{};
  int mti_ = 625;
};

}  // namespace mtnlg::tasks
