// AdamW on the CPU: one and several steps against values computed by hand from the formula,
// decoupled weight decay, grad_scale, f32 vs f64, 1 vs 2 threads, and the many-tensor call.
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "core/kernels/adamw_math.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;

TEST_CASE("one AdamW step from zero moments") {
  auto be = make_cpu_backend(1);
  Tensor p = be->alloc({1}, DType::kF64), g = be->alloc({1}, DType::kF64);
  Tensor m = be->alloc({1}, DType::kF64), v = be->alloc({1}, DType::kF64);
  be->fill(p, 1.0);
  be->fill(g, 0.5);
  AdamWArgs a;
  a.lr = 0.1;
  be->adamw_update(p, g, m, v, a);
  // m = 0.1 * 0.5 = 0.05, v = 0.001 * 0.25 = 0.00025; mhat = 0.5, vhat = 0.25;
  // p = 1 - 0.1 * 0.5 / (0.5 + 1e-8).
  CHECK(m.data_as<double>()[0] == Approx(0.05).epsilon(1e-14));
  CHECK(v.data_as<double>()[0] == Approx(0.00025).epsilon(1e-14));
  CHECK(p.data_as<double>()[0] == Approx(1.0 - 0.1 * 0.5 / (0.5 + 1e-8)).epsilon(1e-14));
}

TEST_CASE("several AdamW steps follow the formula - with decoupled weight decay") {
  auto be = make_cpu_backend(2);
  const int64_t n = 1000;
  Tensor p = random_tensor({n}, DType::kF64, 1), m = be->alloc({n}, DType::kF64),
         v = be->alloc({n}, DType::kF64);
  std::vector<double> rp = to_vec(p), rm(n, 0.0), rv(n, 0.0);
  AdamWArgs a;
  a.lr = 1e-2;
  a.beta1 = 0.8;
  a.beta2 = 0.95;
  a.eps = 1e-6;
  a.weight_decay = 0.1;
  a.grad_scale = 0.5;
  for (int64_t step = 1; step <= 5; ++step) {
    Tensor g = random_tensor({n}, DType::kF64, 100 + static_cast<uint64_t>(step));
    const auto vg = to_vec(g);
    a.step = step;
    be->adamw_update(p, g, m, v, a);
    for (int64_t i = 0; i < n; ++i) {
      const double gi = vg[i] * a.grad_scale;
      rm[i] = a.beta1 * rm[i] + (1 - a.beta1) * gi;
      rv[i] = a.beta2 * rv[i] + (1 - a.beta2) * gi * gi;
      const double mh = rm[i] / (1 - std::pow(a.beta1, step));
      const double vh = rv[i] / (1 - std::pow(a.beta2, step));
      rp[i] -= a.lr * (mh / (std::sqrt(vh) + a.eps) + a.weight_decay * rp[i]);
    }
  }
  const auto got = to_vec(p);
  for (int64_t i = 0; i < n; ++i) REQUIRE(got[i] == Approx(rp[i]).epsilon(1e-12));
}

TEST_CASE("weight decay is decoupled: with zero gradient it is exactly p -= lr * wd * p") {
  auto be = make_cpu_backend(1);
  Tensor p = random_tensor({16}, DType::kF64, 2), g = be->alloc({16}, DType::kF64);
  Tensor m = be->alloc({16}, DType::kF64), v = be->alloc({16}, DType::kF64);
  const auto before = to_vec(p);
  AdamWArgs a;
  a.lr = 0.5;
  a.weight_decay = 0.2;
  a.step = 3;
  be->adamw_update(p, g, m, v, a);
  const auto after = to_vec(p);
  for (size_t i = 0; i < before.size(); ++i) CHECK(after[i] == before[i] - 0.5 * (0.2 * before[i]));
  CHECK(be->sum_squares(m) == 0.0);
  CHECK(be->sum_squares(v) == 0.0);
}

TEST_CASE("AdamW f32 agrees with f64 - 1 and 2 threads are bitwise identical") {
  auto be1 = make_cpu_backend(1);
  auto be2 = make_cpu_backend(2);
  const int64_t n = 50001;
  Tensor p64 = random_tensor({n}, DType::kF64, 3), g64 = random_tensor({n}, DType::kF64, 4);
  Tensor m64 = be2->alloc({n}, DType::kF64), v64 = be2->alloc({n}, DType::kF64);
  Tensor p1 = convert(p64, DType::kF32), p2 = convert(p64, DType::kF32),
         g32 = convert(g64, DType::kF32);
  Tensor m1 = be1->alloc({n}, DType::kF32), v1 = be1->alloc({n}, DType::kF32);
  Tensor m2 = be2->alloc({n}, DType::kF32), v2 = be2->alloc({n}, DType::kF32);
  AdamWArgs a;
  a.lr = 1e-3;
  a.weight_decay = 0.01;
  for (int64_t step = 1; step <= 3; ++step) {
    a.step = step;
    be2->adamw_update(p64, g64, m64, v64, a);
    be1->adamw_update(p1, g32, m1, v1, a);
    be2->adamw_update(p2, g32, m2, v2, a);
  }
  // Each step moves p by ~lr; float rounding of p (|p| < 1) is ~6e-8 per step.
  CHECK(max_abs_diff(p2, p64) < 1e-6);
  CHECK(bitwise_equal(p1, p2));
  CHECK(bitwise_equal(m1, m2));
  CHECK(bitwise_equal(v1, v2));
}

TEST_CASE(
    "fused AdamW with rounding equals the update then the copy - bf16 and fp16, bit for bit") {
  for (DType narrow : {DType::kBF16, DType::kF16}) {
    INFO(dtype_name(narrow));
    auto be = make_cpu_backend(2);
    const int64_t n = 20000;  // several of the kernels' fixed blocks, and a ragged last one
    Tensor master = random_tensor({n}, DType::kF32, 3), g = random_tensor({n}, DType::kF32, 4);
    Tensor m = random_tensor({n}, DType::kF32, 5, 0.0, 0.1);
    Tensor v = random_tensor({n}, DType::kF32, 6, 0.0, 0.01);
    Tensor master2 = clone(master), m2 = clone(m), v2 = clone(v);
    Tensor w = be->alloc({n}, narrow), w2 = be->alloc({n}, narrow);
    AdamWArgs a;
    a.lr = 3e-3;
    a.weight_decay = 0.1;
    a.step = 7;
    be->adamw_update_rounded(w, master, g, m, v, a);
    be->adamw_update(master2, g, m2, v2, a);
    be->copy(w2, master2);
    CHECK(bitwise_equal(master, master2));
    CHECK(bitwise_equal(m, m2));
    CHECK(bitwise_equal(v, v2));
    CHECK(bitwise_equal(w, w2));
    Tensor narrow_v = clone(w);  // moments are fp32
    CHECK_THROWS(be->adamw_update_rounded(w, master, g, m, narrow_v, a));
  }
}

TEST_CASE("adamw_update_many is each tensor's adamw_update or adamw_update_rounded, bit for bit") {
  auto be = make_cpu_backend(2);
  AdamWArgs args;
  args.lr = 1e-3;
  args.weight_decay = 0.1;
  args.step = 4;
  args.grad_scale = 0.5;
  // Item 0: an f32 parameter; item 1: a bf16 weight with its fp32 master; item 2: empty.
  const auto fresh = [](int64_t n, uint64_t seed) {
    return std::vector<Tensor>{random_tensor({n}, DType::kF32, seed),
                               random_tensor({n}, DType::kF32, seed + 1),
                               random_tensor({n}, DType::kF32, seed + 2, -0.1, 0.1),
                               random_tensor({n}, DType::kF32, seed + 3, 0.0, 0.1)};
  };
  std::vector<Tensor> a = fresh(37, 1), b = fresh(41, 5), c = fresh(0, 9);
  std::vector<Tensor> a2 = fresh(37, 1), b2 = fresh(41, 5), c2 = fresh(0, 9);
  Tensor wb = Tensor::cpu({41}, DType::kBF16), wb2 = Tensor::cpu({41}, DType::kBF16);
  be->adamw_update(a[0], a[1], a[2], a[3], args);
  be->adamw_update_rounded(wb, b[0], b[1], b[2], b[3], args);
  be->adamw_update(c[0], c[1], c[2], c[3], args);
  be->adamw_update_many({AdamWItem{&a2[0], nullptr, &a2[1], &a2[2], &a2[3], args},
                         AdamWItem{&wb2, &b2[0], &b2[1], &b2[2], &b2[3], args},
                         AdamWItem{&c2[0], nullptr, &c2[1], &c2[2], &c2[3], args}});
  for (size_t k = 0; k < 4; ++k) {  // param (or master), grad, m, v
    CHECK(bitwise_equal(a[k], a2[k]));
    CHECK(bitwise_equal(b[k], b2[k]));
  }
  CHECK(bitwise_equal(wb, wb2));
}
