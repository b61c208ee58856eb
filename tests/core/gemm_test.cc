// Backend::gemm on the CPU: every transpose combination against a naive f64 product, alpha and
// beta, f32 against f64, the 1- vs 2-thread split, and the shape/dtype checks.
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;

namespace {

// c = alpha * op(a) op(b) + beta * c0, all in double.
std::vector<double> naive_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor& c0,
                               double alpha, double beta, int64_t m, int64_t n, int64_t k) {
  const auto va = to_vec(a), vb = to_vec(b), vc = to_vec(c0);
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t p = 0; p < k; ++p)
        s += va[static_cast<size_t>(ta ? p * m + i : i * k + p)] *
             vb[static_cast<size_t>(tb ? j * k + p : p * n + j)];
      c[static_cast<size_t>(i * n + j)] = alpha * s + beta * vc[static_cast<size_t>(i * n + j)];
    }
  return c;
}

}  // namespace

TEST_CASE("gemm matches a naive product for every transpose combination") {
  auto be = make_cpu_backend(2);
  const int64_t m = 37, n = 29, k = 41;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("trans_a " << ta << " trans_b " << tb);
      Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, DType::kF64, 1);
      Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, DType::kF64, 2);
      Tensor c = random_tensor({m, n}, DType::kF64, 3);
      const auto want = naive_gemm(a, ta, b, tb, c, 0.7, 0.3, m, n, k);
      be->gemm(c, a, ta, b, tb, 0.7, 0.3);
      const auto got = to_vec(c);
      double err = 0;
      for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::abs(got[i] - want[i]));
      CHECK(err < 1e-12);
    }
}

TEST_CASE("gemm views leading dimensions as rows and overwrites with beta 0") {
  auto be = make_cpu_backend(1);
  Tensor a = random_tensor({2, 3, 8}, DType::kF64, 4);
  Tensor b = random_tensor({8, 5}, DType::kF64, 5);
  Tensor c = random_tensor({2, 3, 5}, DType::kF64, 6, 1e3, 2e3);  // garbage, must be ignored
  Tensor zero = Tensor::cpu({6, 5}, DType::kF64);
  const auto want = naive_gemm(a.as_2d(), false, b, false, zero, 1.0, 0.0, 6, 5, 8);
  be->gemm(c, a, false, b, false, 1.0, 0.0);
  const auto got = to_vec(c);
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12));
}

TEST_CASE("gemm f32 agrees with f64") {
  // Inputs in [-1, 1), k = 256: float rounding of each product and of the running sum gives an
  // error of order sqrt(k) * 2^-24 * |row|·|col| ~ 1e-5; 2e-4 leaves a wide margin.
  auto be = make_cpu_backend(2);
  Tensor a = random_tensor({64, 256}, DType::kF64, 7), b = random_tensor({256, 48}, DType::kF64, 8);
  Tensor c64 = Tensor::cpu({64, 48}, DType::kF64), c32 = Tensor::cpu({64, 48}, DType::kF32);
  be->gemm(c64, a, false, b, false, 1.0, 0.0);
  be->gemm(c32, convert(a, DType::kF32), false, convert(b, DType::kF32), false, 1.0, 0.0);
  CHECK(max_abs_diff(c32, c64) < 2e-4);
}

TEST_CASE("gemm on 1 and 2 threads agrees to rounding") {
  // Not bitwise: each thread runs OpenBLAS on its block of rows (or columns), and OpenBLAS picks
  // its kernels and blocking by problem size, so a split can change the rounding. Runs with the
  // same thread count are bitwise reproducible (checked below).
  auto be1 = make_cpu_backend(1);
  auto be2 = make_cpu_backend(2);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{300, 200}, {70, 333}}) {
    for (bool tb : {false, true}) {
      const int64_t k = 96;
      Tensor a = random_tensor({m, k}, DType::kF32, 9);
      Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, DType::kF32, 10);
      Tensor c1 = random_tensor({m, n}, DType::kF32, 11), c2 = clone(c1);
      Tensor c3 = clone(c2);
      be1->gemm(c1, a, false, b, tb, 1.0, 1.0);
      be2->gemm(c2, a, false, b, tb, 1.0, 1.0);
      be2->gemm(c3, a, false, b, tb, 1.0, 1.0);
      CHECK(max_abs_diff(c1, c2) < 1e-5);
      CHECK(bitwise_equal(c2, c3));
    }
  }
}

TEST_CASE("gemm rejects mismatched shapes and unsupported dtypes") {
  auto be = make_cpu_backend(1);
  Tensor a = Tensor::cpu({3, 4}, DType::kF32), b = Tensor::cpu({5, 2}, DType::kF32);
  Tensor c = Tensor::cpu({3, 2}, DType::kF32);
  CHECK_THROWS_AS(be->gemm(c, a, false, b, false, 1.0, 0.0), Error);
  Tensor ai = Tensor::cpu({3, 4}, DType::kI32), bi = Tensor::cpu({4, 2}, DType::kI32);
  Tensor ci = Tensor::cpu({3, 2}, DType::kI32);
  try {
    be->gemm(ci, ai, false, bi, false, 1.0, 0.0);
    FAIL("no error for i32 gemm");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kUnsupported);
    CHECK_THAT(e.what(), Catch::Contains("gemm"));
  }
}
