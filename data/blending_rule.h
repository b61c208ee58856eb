// Megatron's greedy blending rule (helpers.cpp build_blending_indices), in a header so that its
// floating point can be checked under any compiler flags (tests/data/blend_fma_test.cc).
//
// Sample i goes to the source with the largest error w_k * max(i, 1) - count_k, ties to the
// lowest k. The product is rounded to double before the subtraction, as Megatron's helpers.cpp
// computes it (its Makefile builds for baseline x86-64, which has no FMA). Fused into one FMA
// (GCC's default -ffp-contract=fast once the target has FMA, e.g. -march=x86-64-v3 or native;
// clang's default fuses within an expression) the product is not rounded and near-ties break
// differently: with weights 0.1, 0.2, 0.3, 0.4 the order changes at sample 10, with the 530B
// run's 15 weights at sample 200. So the rounding is forced in the code, not left to a flag.
//
// Ownership: a pure function; nothing shared.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mtnlg {

// a * b rounded to double, never fused with a following add or subtract: the empty asm takes
// the rounded product as an opaque input, so the compiler cannot contract across it.
inline double rounded_product(double a, double b) {
  double p = a * b;
#if defined(__GNUC__) && defined(__x86_64__)
  asm("" : "+x"(p));
#elif defined(__GNUC__) && defined(__aarch64__)
  asm("" : "+w"(p));
#else
  volatile double v = p;
  p = v;
#endif
  return p;
}

// Calls emit(i, k, j) for i < size: sample i of the blend is sample j of source k. A template
// so that each caller's instantiation is compiled with that caller's flags (a test compiles one
// with FMA contraction on).
template <typename Emit>
void blend_greedily(std::span<const double> normalized_weights, int64_t size, Emit&& emit) {
  const size_t n = normalized_weights.size();
  std::vector<int64_t> counts(n, 0);
  for (int64_t i = 0; i < size; ++i) {
    // max(i, 1): the first two positions both go to the largest weight's source.
    const double target = static_cast<double>(i > 1 ? i : 1);
    size_t best = 0;
    double best_error =
        rounded_product(normalized_weights[0], target) - static_cast<double>(counts[0]);
    for (size_t k = 1; k < n; ++k) {
      const double error =
          rounded_product(normalized_weights[k], target) - static_cast<double>(counts[k]);
      if (error > best_error) {  // strict: ties keep the lowest index
        best_error = error;
        best = k;
      }
    }
    emit(i, best, counts[best]++);
  }
}

}  // namespace mtnlg
