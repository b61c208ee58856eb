// reduce_in_order (parallel/group_checks.h), the reduction rule of the CPU transports: block by
// block it must give, bit for bit, what a per-element loop over the sources in rank order gives,
// for every dtype, source count, block boundary and aliasing of out with a source.
#include "parallel/group_checks.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

namespace mtnlg {
namespace {

// The rule written the obvious way: per element, the sources in order, rounded to T after each.
template <typename T>
std::vector<T> reference(const std::vector<std::vector<T>>& srcs, size_t count, ReduceOp op) {
  using A = acc_t<T>;
  std::vector<T> out(count);
  for (size_t e = 0; e < count; ++e) {
    T acc = srcs[0][e];
    for (size_t p = 1; p < srcs.size(); ++p) {
      const A x = static_cast<A>(acc), y = static_cast<A>(srcs[p][e]);
      acc = static_cast<T>(op == ReduceOp::kSum ? x + y : std::max(x, y));
    }
    out[e] = acc;
  }
  return out;
}

template <typename T>
T random_value(std::mt19937& gen) {
  // Wide magnitudes so float sums round and the order shows; integers small enough not to overflow.
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> exp(-6, 6);
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(std::uniform_int_distribution<int>(-1000, 1000)(gen));
  else
    return static_cast<T>(std::ldexp(u(gen), exp(gen)));
}

template <typename T>
bool same_bits(const T* a, const T* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(T)) == 0;
}

}  // namespace

TEMPLATE_TEST_CASE("reduce_in_order equals the per-element rule bit for bit", "", float, double,
                   int32_t, Bf16, F16) {
  std::mt19937 gen(7);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    for (size_t nsrc : {1, 2, 3, 5}) {
      for (size_t count : {0, 1, 511, 512, 513, 1500}) {
        INFO("op " << reduce_op_name(op) << ", " << nsrc << " sources, " << count << " elements");
        std::vector<std::vector<TestType>> data(nsrc, std::vector<TestType>(count));
        for (auto& v : data)
          for (auto& x : v) x = random_value<TestType>(gen);
        const std::vector<TestType> want = reference(data, count, op);
        std::vector<const TestType*> srcs;
        for (auto& v : data) srcs.push_back(v.data());

        std::vector<TestType> out(count);
        reduce_in_order(out.data(), srcs, count, op);
        CHECK(same_bits(out.data(), want.data(), count));

        // In place into each source in turn (a rank reducing into its own buffer).
        for (size_t k = 0; k < nsrc; ++k) {
          auto copy = data;
          std::vector<const TestType*> csrcs;
          for (auto& v : copy) csrcs.push_back(v.data());
          reduce_in_order(copy[k].data(), csrcs, count, op);
          CHECK(same_bits(copy[k].data(), want.data(), count));
        }
      }
    }
  }
}

}  // namespace mtnlg
