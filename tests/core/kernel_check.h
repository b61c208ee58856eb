// Helpers for the CPU kernel tests in tests/core/: random tensors, conversions, a central
// finite-difference gradient check in float64, and bitwise comparison. Header-only; each test
// executable includes it. Not thread-safe (tests are single-threaded).
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "core/backend.h"

namespace mtnlg::test {

// Element i of a CPU f32, f64, bf16 or f16 tensor, as a double (exact).
inline double value_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF64:
      return t.data_as<double>()[i];
    case DType::kBF16:
      return static_cast<float>(t.data_as<Bf16>()[i]);
    case DType::kF16:
      return static_cast<float>(t.data_as<F16>()[i]);
    default:
      return t.data_as<float>()[i];
  }
}

// Sets element i, rounded to the tensor's dtype (nearest even).
inline void set_value(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::kF64:
      t.data_as<double>()[i] = v;
      return;
    case DType::kBF16:
      t.data_as<Bf16>()[i] = Bf16(static_cast<float>(v));
      return;
    case DType::kF16:
      t.data_as<F16>()[i] = F16(static_cast<float>(v));
      return;
    default:
      t.data_as<float>()[i] = static_cast<float>(v);
  }
}

// Uniform in [lo, hi), deterministic in seed; f32 and bf16 tensors get the f64 values rounded.
inline Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, double lo = -1.0,
                            double hi = 1.0) {
  Tensor t = Tensor::cpu(shape, dtype);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) set_value(t, i, dist(gen));
  return t;
}

inline std::vector<double> to_vec(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = value_at(t, i);
  return v;
}

inline Tensor convert(const Tensor& t, DType dtype) {
  Tensor out = Tensor::cpu(t.shape(), dtype);
  for (int64_t i = 0; i < t.numel(); ++i) set_value(out, i, value_at(t, i));
  return out;
}

inline Tensor clone(const Tensor& t) {
  Tensor out = Tensor::cpu(t.shape(), t.dtype());
  if (t.nbytes()) std::memcpy(out.data(), t.data(), t.nbytes());
  return out;
}

// sum_i a[i] * w[i] in double: the scalar "loss" whose gradient with respect to a is w.
inline double weighted_sum(const Tensor& a, const Tensor& w) {
  const auto va = to_vec(a), vw = to_vec(w);
  double s = 0.0;
  for (size_t i = 0; i < va.size(); ++i) s += va[i] * vw[i];
  return s;
}

inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto va = to_vec(a), vb = to_vec(b);
  REQUIRE(va.size() == vb.size());
  double m = 0.0;
  for (size_t i = 0; i < va.size(); ++i) m = std::max(m, std::abs(va[i] - vb[i]));
  return m;
}

// Worst |got - want| over u (|want| + max |want|): roundings of unit u (a narrow format's)
// relative to the element or, for sums that cancel, to the tensor's largest element. NaN is
// the worst.
inline double worst_roundings(const Tensor& got, const Tensor& want, double u) {
  const auto g = to_vec(got), w = to_vec(want);
  REQUIRE(g.size() == w.size());
  double mx = 0;
  for (double v : w) mx = std::max(mx, std::abs(v));
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double r = std::abs(g[i] - w[i]) / (u * (std::abs(w[i]) + mx) + 1e-300);
    if (!(r <= worst)) worst = r;
  }
  return worst;
}

// Checks `analytic` (same shape as the f64 tensor x) against central differences of
// loss(x) = sum(forward(x) * wt) with respect to x: |num - ana| <= rel_tol * max(|num|, |ana|)
// + abs_tol. The loss is evaluated as sum((forward(x) - forward(x0)) * wt), so outputs that the
// perturbed element does not touch contribute exactly zero instead of rounding noise (with
// eps = 1e-6, noise of 1e-16 * |loss| would otherwise swamp small gradients). At most max_checks
// elements are checked (evenly spread) so large tensors stay cheap.
inline void check_gradient(const std::function<Tensor()>& forward, const Tensor& wt, Tensor& x,
                           const Tensor& analytic, const char* what, double rel_tol = 1e-6,
                           double abs_tol = 1e-9, double eps = 1e-6, int64_t max_checks = 400) {
  REQUIRE(x.dtype() == DType::kF64);
  REQUIRE(analytic.numel() == x.numel());
  const auto ana = to_vec(analytic), w = to_vec(wt), base = to_vec(forward());
  REQUIRE(base.size() == w.size());
  auto loss = [&] {
    const auto out = to_vec(forward());
    double s = 0.0;
    for (size_t i = 0; i < out.size(); ++i) s += (out[i] - base[i]) * w[i];
    return s;
  };
  const int64_t n = x.numel();
  const int64_t stride = std::max<int64_t>(1, n / max_checks);
  double* px = x.data_as<double>();
  int failures = 0;
  for (int64_t i = 0; i < n; i += stride) {
    const double orig = px[i];
    px[i] = orig + eps;
    const double lp = loss();
    px[i] = orig - eps;
    const double lm = loss();
    px[i] = orig;
    const double num = (lp - lm) / (2 * eps);
    const double a = ana[static_cast<size_t>(i)];
    if (std::abs(num - a) > rel_tol * std::max(std::abs(num), std::abs(a)) + abs_tol) {
      if (++failures <= 5)
        UNSCOPED_INFO(what << "[" << i << "]: numeric " << num << " analytic " << a);
    }
  }
  CHECK(failures == 0);
}

// A scalar as a one-element f64 tensor, for check_gradient on losses.
inline Tensor scalar_tensor(double v) {
  Tensor t = Tensor::cpu({1}, DType::kF64);
  t.data_as<double>()[0] = v;
  return t;
}

}  // namespace mtnlg::test
