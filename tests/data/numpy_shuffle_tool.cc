// Prints numpy's RandomState(SEED).shuffle(arange(N)) as data/numpy_random.h computes it, one
// value per line, for tests/data/numpy_random_check.py. Usage: numpy_shuffle_tool SEED N
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "data/numpy_random.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SEED N\n", argv[0]);
    return 2;
  }
  const auto seed = static_cast<uint32_t>(std::strtoull(argv[1], nullptr, 10));
  const int64_t n = std::strtoll(argv[2], nullptr, 10);
  std::vector<int64_t> a(static_cast<size_t>(n));
  std::iota(a.begin(), a.end(), int64_t{0});
  mtnlg::NumpyRandomState(seed).shuffle(a.data(), n);
  for (int64_t v : a) std::printf("%lld\n", static_cast<long long>(v));
  return 0;
}
