// LayerNorm on the CPU: forward against a naive f64 reference, every gradient against central
// differences (din, dweight and dbias all accumulate), f32 against f64, 1 vs 2 threads.
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;

namespace {
constexpr double kEps = 1e-5;
}

TEST_CASE("layernorm_forward matches a naive reference") {
  auto be = make_cpu_backend(2);
  const int64_t n = 7, c = 33;
  Tensor in = random_tensor({n, c}, DType::kF64, 1, -2.0, 3.0);
  Tensor w = random_tensor({c}, DType::kF64, 2), b = random_tensor({c}, DType::kF64, 3);
  Tensor out = be->alloc({n, c}, DType::kF64), mean = be->alloc({n}, DType::kF64),
         rstd = be->alloc({n}, DType::kF64);
  be->layernorm_forward(out, mean, rstd, in, w, b, kEps);
  const auto x = to_vec(in), vw = to_vec(w), vb = to_vec(b), y = to_vec(out);
  for (int64_t r = 0; r < n; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < c; ++j) m += x[r * c + j] / c;
    for (int64_t j = 0; j < c; ++j) v += (x[r * c + j] - m) * (x[r * c + j] - m) / c;
    const double s = 1.0 / std::sqrt(v + kEps);
    CHECK(mean.data_as<double>()[r] == Approx(m).epsilon(1e-13));
    CHECK(rstd.data_as<double>()[r] == Approx(s).epsilon(1e-13));
    for (int64_t j = 0; j < c; ++j)
      REQUIRE(y[r * c + j] == Approx((x[r * c + j] - m) * s * vw[j] + vb[j]).margin(1e-13));
  }
}

TEST_CASE("layernorm_backward matches finite differences and accumulates") {
  auto be = make_cpu_backend(2);
  const int64_t n = 5, c = 70;  // c > 64: two column blocks in the weight-gradient pass
  Tensor in = random_tensor({n, c}, DType::kF64, 4, -2.0, 2.0);
  Tensor w = random_tensor({c}, DType::kF64, 5), b = random_tensor({c}, DType::kF64, 6);
  Tensor wt = random_tensor({n, c}, DType::kF64, 7);  // loss = sum(out * wt)
  auto loss = [&] {
    Tensor out = be->alloc({n, c}, DType::kF64), mean = be->alloc({n}, DType::kF64),
           rstd = be->alloc({n}, DType::kF64);
    be->layernorm_forward(out, mean, rstd, in, w, b, kEps);
    return out;
  };
  Tensor out = be->alloc({n, c}, DType::kF64), mean = be->alloc({n}, DType::kF64),
         rstd = be->alloc({n}, DType::kF64);
  be->layernorm_forward(out, mean, rstd, in, w, b, kEps);
  // Start every gradient at a known non-zero value: all three must add, not overwrite.
  Tensor din = random_tensor({n, c}, DType::kF64, 8), dw = random_tensor({c}, DType::kF64, 9),
         db = random_tensor({c}, DType::kF64, 10);
  const Tensor din0 = clone(din), dw0 = clone(dw), db0 = clone(db);
  be->layernorm_backward(din, dw, db, wt, in, w, mean, rstd);
  be->axpy(din, din0, -1.0);
  be->axpy(dw, dw0, -1.0);
  be->axpy(db, db0, -1.0);
  check_gradient(loss, wt, in, din, "din", 1e-6, 1e-8);
  check_gradient(loss, wt, w, dw, "dweight", 1e-6, 1e-8);
  check_gradient(loss, wt, b, db, "dbias", 1e-6, 1e-8);
}

TEST_CASE("layernorm f32 agrees with f64 - 1 and 2 threads are bitwise identical") {
  auto be1 = make_cpu_backend(1);
  auto be2 = make_cpu_backend(2);
  const int64_t n = 64, c = 200;
  Tensor in = random_tensor({n, c}, DType::kF64, 11, -3.0, 3.0);
  Tensor w = random_tensor({c}, DType::kF64, 12), b = random_tensor({c}, DType::kF64, 13);
  Tensor dout = random_tensor({n, c}, DType::kF64, 14);
  struct Result {
    Tensor out, din, dw, db;
  };
  auto run = [&](Backend& be, DType dt) {
    Tensor in_t = convert(in, dt), w_t = convert(w, dt), b_t = convert(b, dt),
           dout_t = convert(dout, dt);
    Result r{be.alloc({n, c}, dt), be.alloc({n, c}, dt), be.alloc({c}, dt), be.alloc({c}, dt)};
    Tensor mean = be.alloc({n}, dt), rstd = be.alloc({n}, dt);
    be.layernorm_forward(r.out, mean, rstd, in_t, w_t, b_t, kEps);
    be.layernorm_backward(r.din, r.dw, r.db, dout_t, in_t, w_t, mean, rstd);
    return r;
  };
  const Result r64 = run(*be2, DType::kF64), r32 = run(*be2, DType::kF32),
               r32b = run(*be1, DType::kF32);
  // Normalised values are O(1); float rounding over c = 200 terms gives ~1e-6, din sums n*c
  // products of O(1) terms (dw over 64 rows): 1e-4 absolute is ~30x the observed error.
  CHECK(max_abs_diff(r32.out, r64.out) < 1e-5);
  CHECK(max_abs_diff(r32.din, r64.din) < 1e-4);
  CHECK(max_abs_diff(r32.dw, r64.dw) < 1e-4);
  CHECK(max_abs_diff(r32.db, r64.db) < 1e-4);
  CHECK(bitwise_equal(r32.out, r32b.out));
  CHECK(bitwise_equal(r32.din, r32b.din));
  CHECK(bitwise_equal(r32.dw, r32b.dw));
  CHECK(bitwise_equal(r32.db, r32b.db));
}

// The contract every backend checks with the same code (core/backend_checks.h): din aliasing
// dout is refused (the CUDA backend refused it and the CPU one ran it before the contract was
// written once), and a tensor of the wrong size or dtype is named.
TEST_CASE("layernorm's contract - din must not alias dout, operands named") {
  auto be = make_cpu_backend(1);
  const int64_t n = 3, c = 8;
  Tensor in = Tensor::cpu({n, c}, DType::kF32), dout = Tensor::cpu({n, c}, DType::kF32);
  Tensor w = Tensor::cpu({c}, DType::kF32), b = Tensor::cpu({c}, DType::kF32);
  Tensor mean = Tensor::cpu({n}, DType::kF32), rstd = Tensor::cpu({n}, DType::kF32);
  Tensor dw = Tensor::cpu({c}, DType::kF32), db = Tensor::cpu({c}, DType::kF32);
  Tensor out = Tensor::cpu({n, c}, DType::kF32);
  be->fill(w, 1.0);
  be->layernorm_forward(out, mean, rstd, in, w, b, 1e-5);
  CHECK_THROWS_WITH(be->layernorm_backward(dout, dw, db, dout, in, w, mean, rstd),
                    Catch::Contains("layernorm_backward: din must not alias dout"));
  Tensor din = Tensor::cpu({n, c}, DType::kF32);
  be->layernorm_backward(din, dw, db, dout, in, w, mean, rstd);  // distinct tensors: fine
  Tensor short_mean = Tensor::cpu({n - 1}, DType::kF32);
  CHECK_THROWS_WITH(be->layernorm_forward(out, short_mean, rstd, in, w, b, 1e-5),
                    Catch::Contains("layernorm_forward: mean is"));
  Tensor wide = Tensor::cpu({c}, DType::kF64);
  CHECK_THROWS_WITH(be->layernorm_backward(din, dw, db, dout, in, wide, mean, rstd),
                    Catch::Contains("layernorm_backward: weight is"));
}
