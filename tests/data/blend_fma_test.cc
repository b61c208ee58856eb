// The blend's order does not depend on floating-point contraction: this file is compiled with
// -mfma -ffp-contract=fast (tests/CMakeLists.txt), so its instantiation of blend_greedily may
// fuse whatever the compiler likes, and it must still equal build_blending_indices from the data
// library and Megatron's order (megatron_order_test). A probe first shows that contraction does
// happen in this file, and a deliberately fused rule shows the weights used are ones where
// fusing changes the order: without both, this test could not fail.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "data/blended_dataset.h"
#include "data/blending_rule.h"
#include "test_util.h"

namespace mtnlg {
namespace {

// a * b - c as this file's flags compile it (fused when contraction is on).
__attribute__((noinline)) double contracted(double a, double b, double c) {
  return a * b - c;
}

std::vector<int64_t> order_here(const std::vector<double>& w, int64_t size) {
  std::vector<int64_t> order(static_cast<size_t>(size));
  blend_greedily(w, size, [&order](int64_t i, size_t k, int64_t) {
    order[static_cast<size_t>(i)] = static_cast<int64_t>(k);
  });
  return order;
}

std::vector<int64_t> order_of_library(const std::vector<double>& w, int64_t size) {
  const BlendingIndices b = build_blending_indices(w, size);
  std::vector<int64_t> order(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) order[static_cast<size_t>(i)] = b.dataset_index[i];
  return order;
}

// The rule with the product fused, as GCC compiles helpers.cpp-like code for an FMA target.
std::vector<int64_t> order_fused(const std::vector<double>& w, int64_t size) {
  std::vector<int64_t> counts(w.size(), 0), order;
  for (int64_t i = 0; i < size; ++i) {
    const double t = static_cast<double>(i > 1 ? i : 1);
    size_t best = 0;
    double best_error = std::fma(w[0], t, -static_cast<double>(counts[0]));
    for (size_t k = 1; k < w.size(); ++k) {
      const double e = std::fma(w[k], t, -static_cast<double>(counts[k]));
      if (e > best_error) {
        best_error = e;
        best = k;
      }
    }
    ++counts[best];
    order.push_back(static_cast<int64_t>(best));
  }
  return order;
}

TEST_CASE("the blend order is the same with FMA contraction as without") {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("fma"))
    test::skip_test("this CPU has no FMA: the contracted build cannot run here");
#endif
  // The probe: 1/3 * 3 rounds to exactly 1, so unfused the result is 0; fused it is the
  // rounding error of 1/3 (-2^-54).
  volatile double third = 1.0 / 3.0, three = 3.0, one = 1.0;
  REQUIRE(contracted(third, three, one) != 0.0);

  const std::vector<std::vector<double>> raw = {
      {1, 1, 1},
      {1, 1, 1, 1, 1, 1, 1},
      {0.3, 0.7},
      {0.1, 0.2, 0.3, 0.4},
      // The 530B run's 15 datasets (the paper's blend weights, in percent).
      {14.3, 5.7, 2.0, 6.5, 14.9, 11.4, 1.1, 2.2, 1.3, 0.7, 0.5, 2.1, 3.6, 24.0, 9.7},
      {2, 3, 5, 7, 11, 13}};
  const int64_t size = 20000;
  int sensitive = 0;
  for (const auto& r : raw) {
    const std::vector<double> w = normalize_blend_weights(r);
    INFO("datasets " << w.size() << ", first weight " << w[0]);
    const std::vector<int64_t> library = order_of_library(w, size);
    CHECK(order_here(w, size) == library);
    sensitive += order_fused(w, size) != library;
  }
  // Fusing must change some of these orders, or the check above proves nothing.
  CHECK(sensitive >= 2);
}

}  // namespace
}  // namespace mtnlg
