// AdamW's element update is an exact sequence of IEEE operations, whatever the compiler does with
// the code around it. This file is built with -ffp-contract=off (tests/CMakeLists.txt) and holds
// two references: core/kernels/adamw_math.h's adamw_element as written (nothing fused), and the
// sequence spelled out below. The CPU backend (built with contraction allowed and FMA available,
// vectorised with a scalar tail) must equal both bit for bit: a product left next to a sum in the
// header is fused in the library and not here, and fails. The CUDA kernels compare with the CPU
// bit for bit in tests/cuda/backend_twin_test.cc on the same grounds.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "core/backend.h"
#include "core/kernels/adamw_math.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;

namespace {

// The spelled-out reference: core/kernels/adamw_math.h's operations, written independently of it.
template <typename T>
void spelled_step(std::vector<T>& p, std::vector<T>& m, std::vector<T>& v, const std::vector<T>& g,
                  const AdamWArgs& a) {
  const double step = static_cast<double>(a.step);
  const T lr = static_cast<T>(a.lr), b1 = static_cast<T>(a.beta1), b2 = static_cast<T>(a.beta2);
  const T eps = static_cast<T>(a.eps), wd = static_cast<T>(a.weight_decay);
  const T scale = static_cast<T>(a.grad_scale);
  const T bc1 = static_cast<T>(1.0 - std::pow(a.beta1, step));
  const T bc2 = static_cast<T>(1.0 - std::pow(a.beta2, step));
  for (size_t i = 0; i < p.size(); ++i) {
    const T gi = g[i] * scale;
    const T c1g = (T(1) - b1) * gi;
    m[i] = std::fma(b1, m[i], c1g);
    const T c2g = (T(1) - b2) * gi;
    const T c2gg = c2g * gi;
    v[i] = std::fma(b2, v[i], c2gg);
    const T mhat = m[i] / bc1;
    const T vhat = v[i] / bc2;
    const T denom = std::sqrt(vhat) + eps;
    const T ratio = mhat / denom;
    const T update = std::fma(wd, p[i], ratio);
    p[i] = std::fma(-lr, update, p[i]);
  }
}

// The header's element function, compiled here without contraction; also checks it against the
// spelled-out sequence.
template <typename T>
void reference_step(std::vector<T>& p, std::vector<T>& m, std::vector<T>& v,
                    const std::vector<T>& g, const AdamWArgs& a) {
  std::vector<T> sp = p, sm = m, sv = v;
  spelled_step(sp, sm, sv, g, a);
  const kernels::AdamWCoeffs<T> k = kernels::adamw_coeffs<T>(a);
  for (size_t i = 0; i < p.size(); ++i) kernels::adamw_element(p[i], m[i], v[i], g[i], k);
  const auto same = [](const std::vector<T>& x, const std::vector<T>& y) {
    return std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
  };
  REQUIRE(same(p, sp));
  REQUIRE(same(m, sm));
  REQUIRE(same(v, sv));
}

template <typename T>
std::vector<T> values(const Tensor& t) {
  const T* d = t.data_as<T>();
  return std::vector<T>(d, d + t.numel());
}

template <typename T>
bool same_bits(const Tensor& t, const std::vector<T>& want) {
  const std::vector<T> got = values<T>(t);
  return std::memcmp(got.data(), want.data(), want.size() * sizeof(T)) == 0;
}

template <typename T>
void check_plain(DType dt) {
  auto be = make_cpu_backend(2);
  // Several of the kernel's blocks, vector bodies and a ragged scalar tail.
  const int64_t n = 20011;
  Tensor p = random_tensor({n}, dt, 11), m = random_tensor({n}, dt, 12, -0.1, 0.1);
  Tensor v = random_tensor({n}, dt, 13, 0.0, 0.1);
  std::vector<T> rp = values<T>(p), rm = values<T>(m), rv = values<T>(v);
  AdamWArgs a;
  a.lr = 3e-3;
  a.beta1 = 0.9;
  a.beta2 = 0.95;
  a.eps = 1e-8;
  a.grad_scale = 0.25;
  for (int64_t step = 1; step <= 4; ++step) {
    a.step = step;
    a.weight_decay = step % 2 == 0 ? 0.1 : 0.0;
    Tensor g = random_tensor({n}, dt, 100 + static_cast<uint64_t>(step));
    be->adamw_update(p, g, m, v, a);
    reference_step(rp, rm, rv, values<T>(g), a);
    INFO("step " << step);
    REQUIRE(same_bits(p, rp));
    REQUIRE(same_bits(m, rm));
    REQUIRE(same_bits(v, rv));
  }
}

}  // namespace

TEST_CASE("AdamW on the CPU is the exact operation sequence - f32 and f64") {
  check_plain<float>(DType::kF32);
  check_plain<double>(DType::kF64);
}

TEST_CASE("AdamW with fp32 masters and the many-tensor call are the exact operation sequence") {
  auto be = make_cpu_backend(2);
  const int64_t n = 4099;
  Tensor master = random_tensor({n}, DType::kF32, 21), g = random_tensor({n}, DType::kF32, 22);
  Tensor m = random_tensor({n}, DType::kF32, 23, -0.1, 0.1);
  Tensor v = random_tensor({n}, DType::kF32, 24, 0.0, 0.1);
  Tensor master2 = clone(master), m2 = clone(m), v2 = clone(v);
  std::vector<float> rp = values<float>(master), rm = values<float>(m), rv = values<float>(v);
  Tensor w = Tensor::cpu({n}, DType::kBF16);
  AdamWArgs a;
  a.lr = 1e-3;
  a.weight_decay = 0.1;
  a.step = 9;
  a.grad_scale = 0.5;
  be->adamw_update_rounded(w, master, g, m, v, a);
  be->adamw_update_many({AdamWItem{&master2, nullptr, &g, &m2, &v2, a}});
  reference_step(rp, rm, rv, values<float>(g), a);
  CHECK(same_bits(master, rp));
  CHECK(same_bits(m, rm));
  CHECK(same_bits(v, rv));
  CHECK(same_bits(master2, rp));
  CHECK(same_bits(m2, rm));
  CHECK(same_bits(v2, rv));
}
