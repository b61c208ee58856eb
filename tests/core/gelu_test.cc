// GeLU (erf and tanh forms) on the CPU: the shared per-element math at known values, forward
// against a naive f64 reference, backward against central differences, aliasing, f32 vs f64,
// 1 vs 2 threads.
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "core/kernels/gelu_math.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;

TEST_CASE("gelu math at known points") {
  // x * Phi(x): Phi(1) = 0.841344746068543, Phi(-2) = 0.0227501319481792.
  CHECK(kernels::gelu_erf(1.0) == Approx(0.841344746068543).epsilon(1e-14));
  CHECK(kernels::gelu_erf(-2.0) == Approx(-2.0 * 0.0227501319481792).epsilon(1e-13));
  CHECK(kernels::gelu_erf(0.0) == 0.0);
  // tanh form: 0.5 (1 + tanh(sqrt(2/pi) (1 + 0.044715))) = 0.8411919906082768
  CHECK(kernels::gelu_tanh(1.0) == Approx(0.8411919906082768).epsilon(1e-13));
  CHECK(kernels::gelu_erf_grad(0.0) == Approx(0.5));
  CHECK(kernels::gelu_tanh_grad(0.0) == Approx(0.5));
}

TEST_CASE("gelu forward matches the reference and backward matches finite differences") {
  auto be = make_cpu_backend(2);
  for (Activation act : {Activation::kGelu, Activation::kGeluTanh}) {
    INFO("activation " << static_cast<int>(act));
    const int64_t n = 3001;
    Tensor in = random_tensor({n}, DType::kF64, 1, -5.0, 5.0);
    Tensor out = be->alloc({n}, DType::kF64);
    be->gelu_forward(out, in, act);
    const auto x = to_vec(in), y = to_vec(out);
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = act == Activation::kGelu
                              ? 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)))
                              : 0.5 * x[i] *
                                    (1.0 + std::tanh(std::sqrt(2.0 / M_PI) *
                                                     (x[i] + 0.044715 * x[i] * x[i] * x[i])));
      REQUIRE(y[i] == Approx(want).margin(1e-14));
    }
    Tensor w = random_tensor({n}, DType::kF64, 2);
    Tensor din = random_tensor({n}, DType::kF64, 3);  // garbage: backward overwrites
    be->gelu_backward(din, w, in, act);
    check_gradient(
        [&] {
          Tensor o = be->alloc({n}, DType::kF64);
          be->gelu_forward(o, in, act);
          return o;
        },
        w, in, din, "din", 1e-6, 1e-9, 1e-6, 4000);
    // din may alias dout.
    Tensor inplace = clone(w);
    be->gelu_backward(inplace, inplace, in, act);
    CHECK(bitwise_equal(inplace, din));
  }
}

TEST_CASE("gelu f32 agrees with f64 - 1 and 2 threads are bitwise identical") {
  auto be1 = make_cpu_backend(1);
  auto be2 = make_cpu_backend(2);
  const int64_t n = 100003;  // not a multiple of the block or vector width: tails are exercised
  Tensor in = random_tensor({n}, DType::kF64, 4, -6.0, 6.0);
  Tensor dout = random_tensor({n}, DType::kF64, 5);
  for (Activation act : {Activation::kGelu, Activation::kGeluTanh}) {
    Tensor y64 = be2->alloc({n}, DType::kF64), g64 = be2->alloc({n}, DType::kF64);
    be2->gelu_forward(y64, in, act);
    be2->gelu_backward(g64, dout, in, act);
    Tensor in32 = convert(in, DType::kF32), dout32 = convert(dout, DType::kF32);
    Tensor y1 = be1->alloc({n}, DType::kF32), y2 = be2->alloc({n}, DType::kF32);
    Tensor g1 = be1->alloc({n}, DType::kF32), g2 = be2->alloc({n}, DType::kF32);
    be1->gelu_forward(y1, in32, act);
    be2->gelu_forward(y2, in32, act);
    be1->gelu_backward(g1, dout32, in32, act);
    be2->gelu_backward(g2, dout32, in32, act);
    // |x| <= 6 and libmvec's float erf/tanh/exp are within a few ulp: errors ~ 6 * 2^-23.
    CHECK(max_abs_diff(y2, y64) < 5e-6);
    CHECK(max_abs_diff(g2, g64) < 5e-6);
    CHECK(bitwise_equal(y1, y2));
    CHECK(bitwise_equal(g1, g2));
  }
}

// The contract every backend checks with the same code (core/backend_checks.h check_gelu_*):
// out must not alias in (it was documented, and checked by neither backend), din may alias dout
// but not in, operands of another dtype or size named.
TEST_CASE("gelu's contract - aliasing and operands named") {
  auto be = make_cpu_backend(1);
  Tensor in = Tensor::cpu({4, 6}, DType::kF32), dout = Tensor::cpu({4, 6}, DType::kF32);
  CHECK_THROWS_WITH(be->gelu_forward(in, in, Activation::kGelu),
                    Catch::Contains("gelu_forward: out must not alias in"));
  CHECK_THROWS_WITH(be->gelu_backward(in, dout, in, Activation::kGelu),
                    Catch::Contains("gelu_backward: din must not alias in"));
  be->gelu_backward(dout, dout, in, Activation::kGelu);  // din aliasing dout: allowed
  Tensor narrow = Tensor::cpu({4, 6}, DType::kBF16), dbias = Tensor::cpu({6}, DType::kF32);
  CHECK_THROWS_WITH(be->gelu_forward(narrow, in, Activation::kGelu),
                    Catch::Contains("gelu_forward: out is"));
  Tensor din = Tensor::cpu({4, 6}, DType::kF32), short_dout = Tensor::cpu({4, 5}, DType::kF32);
  CHECK_THROWS_WITH(be->gelu_bias_backward(din, dbias, short_dout, in, Activation::kGelu),
                    Catch::Contains("gelu_bias_backward: dout is"));
}

TEST_CASE("gelu_bias_backward is gelu_backward then bias_backward, bit for bit - any threads") {
  // The front's contract (the CUDA backend fuses the two in one kernel; its twin test compares):
  // on the CPU, the same bits as the separate calls on 1 and 2 threads, din aliasing dout as the
  // MLP's backward passes it.
  const DType dt = GENERATE(DType::kBF16, DType::kF32);
  const int64_t c = GENERATE(int64_t{48}, int64_t{3072}, int64_t{40});
  const Activation act = GENERATE(Activation::kGelu, Activation::kGeluTanh);
  INFO("dtype " << dtype_name(dt) << ", c " << c << ", activation " << static_cast<int>(act));
  const int64_t rows = 37;
  const Tensor in = random_tensor({rows, c}, dt, 11, -4.0, 4.0);
  const Tensor dout = random_tensor({rows, c}, dt, 12);
  const Tensor bias0 = random_tensor({c}, DType::kF32, 13);

  auto ref_be = make_cpu_backend(1);
  Tensor want = Tensor::cpu({rows, c}, dt), want_db = Tensor::cpu({c}, DType::kF32);
  ref_be->copy(want_db, bias0);
  ref_be->gelu_backward(want, dout, in, act);
  ref_be->bias_backward(want_db, want);

  for (int threads : {1, 2}) {
    auto be = make_cpu_backend(threads);
    Tensor d = Tensor::cpu({rows, c}, dt), db = Tensor::cpu({c}, DType::kF32);
    be->copy(d, dout);
    be->copy(db, bias0);
    be->gelu_bias_backward(d, db, d, in, act);
    CHECK(bitwise_equal(d, want));
    CHECK(bitwise_equal(db, want_db));
  }
}
