// Backend memory and elementwise ops on the CPU: alloc, fill, copy (with conversion), add, axpy,
// scale, sum_squares (double accumulation), add_bias and bias_backward (accumulates).
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;

TEST_CASE("alloc is zero-filled on the CPU - fill sets every element") {
  auto be = make_cpu_backend(2);
  CHECK(be->device() == Device::kCPU);
  Tensor t = be->alloc({100000}, DType::kF32);
  CHECK(be->sum_squares(t) == 0.0);
  be->fill(t, 1.5);
  for (float v : std::vector<float>(t.data_as<float>(), t.data_as<float>() + t.numel()))
    REQUIRE(v == 1.5f);
  Tensor i = be->alloc({5}, DType::kI32);
  be->fill(i, 7);
  CHECK(i.data_as<int32_t>()[4] == 7);
}

TEST_CASE("copy: same dtype - f32 <-> f64 - i32 - and unsupported pairs") {
  auto be = make_cpu_backend(2);
  Tensor a = random_tensor({3, 70001}, DType::kF64, 1);
  Tensor f = be->alloc({3 * 70001}, DType::kF32);
  be->copy(f, a);
  Tensor back = be->alloc({3, 70001}, DType::kF64);
  be->copy(back, f);
  const auto va = to_vec(a), vb = to_vec(back);
  for (size_t i = 0; i < va.size(); ++i) REQUIRE(vb[i] == static_cast<float>(va[i]));
  Tensor same = be->alloc({3, 70001}, DType::kF64);
  be->copy(same, a);
  CHECK(bitwise_equal(same, a));
  Tensor i1 = be->alloc({4}, DType::kI32), i2 = be->alloc({4}, DType::kI32);
  i1.data_as<int32_t>()[2] = -9;
  be->copy(i2, i1);
  CHECK(i2.data_as<int32_t>()[2] == -9);
  CHECK_THROWS_AS(be->copy(f, i1), Error);  // numel mismatch
  Tensor fi = be->alloc({4}, DType::kF32);
  CHECK_THROWS_AS(be->copy(fi, i1), Error);  // i32 -> f32 unsupported
}

TEST_CASE("add - axpy - scale match the definitions - with aliasing") {
  auto be = make_cpu_backend(2);
  const int64_t n = 20011;
  Tensor a = random_tensor({n}, DType::kF64, 2), b = random_tensor({n}, DType::kF64, 3);
  const auto va = to_vec(a), vb = to_vec(b);
  Tensor out = be->alloc({n}, DType::kF64);
  be->add(out, a, b);
  be->add(a, a, b);  // out aliases a
  auto vo = to_vec(out), va2 = to_vec(a);
  for (size_t i = 0; i < va.size(); ++i) {
    REQUIRE(vo[i] == va[i] + vb[i]);
    REQUIRE(va2[i] == va[i] + vb[i]);
  }
  be->axpy(out, b, -2.0);
  be->scale(out, 0.5);
  vo = to_vec(out);
  for (size_t i = 0; i < va.size(); ++i) REQUIRE(vo[i] == Approx(0.5 * (va[i] - vb[i])));
}

TEST_CASE("sum_squares accumulates f32 data in double") {
  auto be = make_cpu_backend(2);
  // 2^22 copies of 0.1f: a float accumulator would be off by ~1e-3 relative; double is exact
  // to ~1e-16 per add.
  const int64_t n = int64_t{1} << 22;
  Tensor t = be->alloc({n}, DType::kF32);
  be->fill(t, 0.1);
  const double x = static_cast<double>(0.1f);
  CHECK(be->sum_squares(t) == Approx(static_cast<double>(n) * x * x).epsilon(1e-12));
  Tensor d = random_tensor({1001}, DType::kF64, 4);
  double want = 0;
  for (double v : to_vec(d)) want += v * v;
  CHECK(be->sum_squares(d) == Approx(want).epsilon(1e-14));
}

TEST_CASE("add_bias adds per column - bias_backward accumulates column sums") {
  auto be = make_cpu_backend(2);
  const int64_t rows = 13, c = 150;
  Tensor y = random_tensor({rows, c}, DType::kF64, 5), bias = random_tensor({c}, DType::kF64, 6);
  const auto y0 = to_vec(y), vb = to_vec(bias);
  be->add_bias(y, bias);
  const auto y1 = to_vec(y);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) REQUIRE(y1[r * c + j] == y0[r * c + j] + vb[j]);

  // Gradient of loss = sum(w * add_bias(y, bias)) w.r.t. bias, added onto a non-zero dbias.
  Tensor w = random_tensor({rows, c}, DType::kF64, 7);
  Tensor dbias = random_tensor({c}, DType::kF64, 8);
  const auto before = to_vec(dbias);
  be->bias_backward(dbias, w);
  Tensor grad = Tensor::cpu({c}, DType::kF64);
  const auto vd = to_vec(dbias);
  for (int64_t j = 0; j < c; ++j) grad.data_as<double>()[j] = vd[j] - before[j];
  Tensor y_in = random_tensor({rows, c}, DType::kF64, 9);
  check_gradient(
      [&] {
        Tensor yy = clone(y_in);
        be->add_bias(yy, bias);
        return yy;
      },
      w, bias, grad, "dbias");
}

TEST_CASE("elementwise ops are bitwise identical on 1 and 2 threads") {
  auto be1 = make_cpu_backend(1);
  auto be2 = make_cpu_backend(2);
  Tensor x = random_tensor({300007}, DType::kF32, 10);
  CHECK(be1->sum_squares(x) == be2->sum_squares(x));
  Tensor dy = random_tensor({1000, 300}, DType::kF32, 11);
  Tensor d1 = be1->alloc({300}, DType::kF32), d2 = be2->alloc({300}, DType::kF32);
  be1->bias_backward(d1, dy);
  be2->bias_backward(d2, dy);
  CHECK(bitwise_equal(d1, d2));
  Tensor y1 = clone(x), y2 = clone(x);
  be1->axpy(y1, x, 0.3);
  be2->axpy(y2, x, 0.3);
  CHECK(bitwise_equal(y1, y2));
}

TEST_CASE("ops on unsupported dtypes name the op") {
  auto be = make_cpu_backend(1);
  Tensor t = Tensor::cpu({4}, DType::kI32);  // scale is for floating tensors
  try {
    be->scale(t, 2.0);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kUnsupported);
    CHECK_THAT(e.what(), Catch::Contains("scale"));
  }
  // A bf16 model's AdamW runs on its fp32 masters; a bf16 update is refused, not rounded.
  Tensor p = Tensor::cpu({4}, DType::kBF16), g = Tensor::cpu({4}, DType::kBF16);
  Tensor m = Tensor::cpu({4}, DType::kBF16), v = Tensor::cpu({4}, DType::kBF16);
  try {
    be->adamw_update(p, g, m, v, AdamWArgs{});
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kUnsupported);
    CHECK_THAT(e.what(), Catch::Contains("adamw_update"));
  }
}
