// Cross entropy over the first `vocab` of V_padded columns on the CPU: loss against a naive f64
// log-sum-exp, padding never matters and gets zero gradient, the gradient against central
// differences, grad_scale, in-place (dlogits aliasing logits), f32 vs f64, 1 vs 2 threads.
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;

namespace {
constexpr int64_t kN = 6, kVocab = 37, kPadded = 48;

Tensor targets() {
  Tensor t = Tensor::cpu({kN}, DType::kI32);
  const int32_t ids[kN] = {0, 36, 5, 5, 17, 30};
  for (int64_t i = 0; i < kN; ++i) t.data_as<int32_t>()[i] = ids[i];
  return t;
}

// Padding columns hold huge values: any leak into max, sum or gradient shows.
Tensor logits_with_padding(DType dt, uint64_t seed) {
  Tensor l = random_tensor({kN, kPadded}, DType::kF64, seed, -4.0, 4.0);
  for (int64_t r = 0; r < kN; ++r)
    for (int64_t j = kVocab; j < kPadded; ++j) l.data_as<double>()[r * kPadded + j] = 1e4 + j;
  return convert(l, dt);
}
}  // namespace

TEST_CASE("cross_entropy_forward matches a naive log-sum-exp and ignores padding") {
  auto be = make_cpu_backend(2);
  Tensor logits = logits_with_padding(DType::kF64, 1);
  Tensor tgt = targets();
  const auto x = to_vec(logits);
  double want = 0;
  for (int64_t r = 0; r < kN; ++r) {
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < kVocab; ++j) mx = std::max(mx, x[r * kPadded + j]);
    for (int64_t j = 0; j < kVocab; ++j) sum += std::exp(x[r * kPadded + j] - mx);
    want += std::log(sum) + mx - x[r * kPadded + tgt.data_as<int32_t>()[r]];
  }
  CHECK(be->cross_entropy_forward(logits, tgt, kVocab) == Approx(want).epsilon(1e-14));
  // Changing the padding changes nothing.
  Tensor other = clone(logits);
  for (int64_t r = 0; r < kN; ++r) other.data_as<double>()[r * kPadded + kPadded - 1] = -3.0;
  CHECK(be->cross_entropy_forward(other, tgt, kVocab) ==
        be->cross_entropy_forward(logits, tgt, kVocab));
  Tensor bad = targets();
  bad.data_as<int32_t>()[2] = kVocab;  // a padding column is not a valid target
  CHECK_THROWS_AS(be->cross_entropy_forward(logits, bad, kVocab), Error);
}

TEST_CASE("cross_entropy_backward matches finite differences - scales - zeroes padding") {
  auto be = make_cpu_backend(2);
  Tensor logits = logits_with_padding(DType::kF64, 2);
  Tensor tgt = targets();
  const double scale = 0.37;
  Tensor dlogits = random_tensor({kN, kPadded}, DType::kF64, 3);  // garbage: overwritten
  be->cross_entropy_backward(dlogits, logits, tgt, kVocab, scale);
  const auto g = to_vec(dlogits);
  for (int64_t r = 0; r < kN; ++r)
    for (int64_t j = kVocab; j < kPadded; ++j) REQUIRE(g[r * kPadded + j] == 0.0);
  // The loss times `scale` has gradient dlogits (padding: zero numerically too). Row losses
  // are taken one by one (slices) so a perturbation's effect is not drowned in the other rows'
  // rounding; a row loss of ~3 still carries ~3e-16 / 1e-6 of noise, hence abs_tol 3e-9.
  Tensor ones = Tensor::cpu({kN}, DType::kF64);
  for (int64_t r = 0; r < kN; ++r) ones.data_as<double>()[r] = scale;
  check_gradient(
      [&] {
        Tensor rows = Tensor::cpu({kN}, DType::kF64);
        for (int64_t r = 0; r < kN; ++r)
          rows.data_as<double>()[r] =
              be->cross_entropy_forward(logits.slice(r, r + 1), tgt.slice(r, r + 1), kVocab);
        return rows;
      },
      ones, logits, dlogits, "dlogits", 1e-6, 3e-9);
  // In place: dlogits aliasing logits gives the same numbers.
  Tensor inplace = clone(logits);
  be->cross_entropy_backward(inplace, inplace, tgt, kVocab, scale);
  CHECK(bitwise_equal(inplace, dlogits));
}

TEST_CASE("cross entropy f32 agrees with f64 - 1 and 2 threads are bitwise identical") {
  auto be1 = make_cpu_backend(1);
  auto be2 = make_cpu_backend(2);
  const int64_t n = 512, vocab = 1000, vp = 1024;
  Tensor l64 = random_tensor({n, vp}, DType::kF64, 4, -5.0, 5.0);
  Tensor tgt = Tensor::cpu({n}, DType::kI32);
  for (int64_t i = 0; i < n; ++i)
    tgt.data_as<int32_t>()[i] = static_cast<int32_t>((i * 31) % vocab);
  Tensor l32 = convert(l64, DType::kF32);
  const double loss64 = be2->cross_entropy_forward(l64, tgt, vocab);
  const double loss32 = be2->cross_entropy_forward(l32, tgt, vocab);
  CHECK(loss32 == be1->cross_entropy_forward(l32, tgt, vocab));
  // Per row: float log-sum-exp over 1000 terms, error ~1e-6 on a loss of ~6; 512 rows.
  CHECK(std::abs(loss32 - loss64) < 512 * 1e-5);
  Tensor g64 = be2->alloc({n, vp}, DType::kF64), g1 = be1->alloc({n, vp}, DType::kF32),
         g2 = be2->alloc({n, vp}, DType::kF32);
  be2->cross_entropy_backward(g64, l64, tgt, vocab, 1.0 / n);
  be1->cross_entropy_backward(g1, l32, tgt, vocab, 1.0 / n);
  be2->cross_entropy_backward(g2, l32, tgt, vocab, 1.0 / n);
  CHECK(max_abs_diff(g2, g64) < 1e-8);  // entries are at most 1/n ~ 2e-3, float-relative 1e-6
  CHECK(bitwise_equal(g1, g2));
}

TEST_CASE("cross_entropy_forward_add adds the returned loss bit for bit - and checks its total") {
  auto be = make_cpu_backend(2);
  const DType dt = GENERATE(DType::kF32, DType::kBF16);
  Tensor tgt = targets();
  Tensor total = be->alloc({1}, DType::kF64);
  CHECK(total.data_as<double>()[0] == 0.0);  // alloc zeroes
  double want = 0.0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    Tensor logits = logits_with_padding(dt, seed);
    be->cross_entropy_forward_add(total, logits, tgt, kVocab);
    want += be->cross_entropy_forward(logits, tgt, kVocab);
    CHECK(total.data_as<double>()[0] == want);
  }
  CHECK(want > 0.0);
  Tensor logits = logits_with_padding(dt, 4);
  Tensor wide = be->alloc({2}, DType::kF64), narrow = be->alloc({1}, DType::kF32);
  CHECK_THROWS_WITH(be->cross_entropy_forward_add(wide, logits, tgt, kVocab),
                    Catch::Contains("cross_entropy_forward_add: total"));
  CHECK_THROWS_WITH(be->cross_entropy_forward_add(narrow, logits, tgt, kVocab),
                    Catch::Contains("cross_entropy_forward_add: total"));
  // A bad target is the CPU's usual error, at the operation, and adds nothing.
  Tensor bad = targets();
  bad.data_as<int32_t>()[2] = kVocab;
  CHECK_THROWS_WITH(be->cross_entropy_forward_add(total, logits, bad, kVocab),
                    Catch::Contains("target id 37 at position 2"));
  CHECK(total.data_as<double>()[0] == want);
}
