// NumpyRandomState against numpy 1.24's legacy RandomState. The expected values were printed by
// /usr/bin/python3 with numpy (Debian 12):
//   r = np.random.RandomState(seed); r.randint(0, 2**32, size=4, dtype=np.uint64)  # raw draws
//   a = np.arange(n, dtype=np.int32); np.random.RandomState(seed).shuffle(a)
// with a's first six and last three elements and sum(i * a[i]) mod 2^64 as its fingerprint.
// The live cross-check against the installed numpy is tests/data/numpy_random_check.py.
#include "data/numpy_random.h"

#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

using namespace mtnlg;

namespace {

struct ShuffleCase {
  uint32_t seed;
  int64_t n;
  std::vector<int32_t> head, tail;
  uint64_t fingerprint;
};

std::vector<int32_t> shuffled(uint32_t seed, int64_t n) {
  std::vector<int32_t> a(static_cast<size_t>(n));
  std::iota(a.begin(), a.end(), 0);
  NumpyRandomState(seed).shuffle(a.data(), n);
  return a;
}

}  // namespace

TEST_CASE("RandomState(seed) draws numpy's raw 32-bit values") {
  const std::vector<std::pair<uint32_t, std::vector<uint32_t>>> cases = {
      {0, {2357136044u, 2546248239u, 3071714933u, 3626093760u}},
      {1234, {822569775u, 2137449171u, 2671936806u, 3512589365u}},
      {4294967295u, {419326371u, 479346978u, 3918654476u, 2416749639u}}};
  for (const auto& [seed, want] : cases) {
    INFO("seed " << seed);
    NumpyRandomState r(seed);
    for (uint32_t v : want) CHECK(r.next_uint32() == v);
  }
}

TEST_CASE("shuffle matches numpy's RandomState.shuffle - several seeds and lengths") {
  const std::vector<ShuffleCase> cases = {
      {0, 1, {0}, {0}, 0},
      {0, 2, {1, 0}, {1, 0}, 0},
      {0, 10, {2, 8, 4, 9, 1, 6}, {3, 0, 5}, 185},
      {0, 1000, {993, 859, 298, 553, 672, 971}, {629, 559, 684}, 247872640},
      {0,
       100003,
       {3582, 60500, 76460, 21333, 3885, 65944},
       {42613, 43567, 68268},
       249885096591268ull},
      {1234, 2, {0, 1}, {0, 1}, 1},
      {1234, 10, {7, 2, 9, 1, 0, 8}, {5, 6, 3}, 197},
      {1234, 1000, {681, 990, 155, 768, 438, 363}, {294, 723, 815}, 251398022},
      {1234,
       100003,
       {84826, 74372, 88626, 51882, 11306, 7660},
       {34086, 58067, 92975},
       249883847320815ull},
      {42, 10, {8, 1, 5, 0, 7, 2}, {4, 3, 6}, 209},
      {42, 1000, {521, 737, 740, 660, 411, 678}, {860, 435, 102}, 251374799},
      {42,
       100003,
       {87184, 98871, 1956, 11529, 39495, 71405},
       {76820, 860, 15795},
       249973242980359ull}};
  for (const ShuffleCase& c : cases) {
    INFO("seed " << c.seed << ", n " << c.n);
    const std::vector<int32_t> a = shuffled(c.seed, c.n);
    const size_t h = c.head.size(), t = c.tail.size();
    CHECK(std::vector<int32_t>(a.begin(), a.begin() + static_cast<int64_t>(h)) == c.head);
    CHECK(std::vector<int32_t>(a.end() - static_cast<int64_t>(t), a.end()) == c.tail);
    uint64_t fp = 0;
    for (size_t i = 0; i < a.size(); ++i)
      fp += static_cast<uint64_t>(i) * static_cast<uint64_t>(a[i]);
    CHECK(fp == c.fingerprint);
  }
}

TEST_CASE("one RandomState shuffles twice as numpy does - the second continues the stream") {
  // Megatron draws its document index and then its shuffle index from one RandomState.
  NumpyRandomState r(7);
  std::vector<int32_t> a(20);
  std::iota(a.begin(), a.end(), 0);
  r.shuffle(a.data(), 20);
  std::vector<int64_t> b(13);
  std::iota(b.begin(), b.end(), 0);
  r.shuffle(b.data(), 13);
  CHECK(a ==
        std::vector<int32_t>{1, 17, 2, 5, 11, 0, 18, 6, 13, 19, 10, 14, 8, 16, 9, 12, 7, 3, 4, 15});
  CHECK(b == std::vector<int64_t>{9, 1, 4, 2, 6, 12, 0, 11, 7, 10, 8, 5, 3});
}

TEST_CASE("interval stays in [0, max] and covers it") {
  NumpyRandomState r(3);
  for (uint64_t max : {0ull, 1ull, 5ull, 6ull, 7ull, 8ull, 1000ull}) {
    std::vector<int> seen(max + 1, 0);
    // 30 (max + 1) draws miss a value with probability about (max + 1) e^-30 (fixed seed).
    for (uint64_t k = 0; k < 30 * (max + 1); ++k) {
      const uint64_t v = r.interval(max);
      REQUIRE(v <= max);
      seen[v] = 1;
    }
    CHECK(std::accumulate(seen.begin(), seen.end(), 0) == static_cast<int>(max + 1));
  }
}
