// Causal self-attention on the CPU: forward against a naive f64 reference (with and without
// dropout), the saved statistics are each row's log-sum-exp, causality, dqkv against central
// differences (dropout 0 and > 0: the rng stream makes the function deterministic; backward
// recomputes the softmax from the statistics), f32 vs f64, 1 vs 2 threads, and a backward that
// depends on the saved statistics (wrong ones give a wrong gradient).
#include <catch2/catch.hpp>

#include "core/backend.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;

namespace {

struct Dims {
  int64_t b, s, heads, hd;
};

// out [b, s, heads*hd] by the definition, in double, with backend.h's dropout element index.
std::vector<double> naive_attention(const Tensor& qkv, Dims d, double p, RngStream rng,
                                    std::vector<double>* lse) {
  const auto x = to_vec(qkv);
  const int64_t ldq = d.heads * 3 * d.hd;
  std::vector<double> out(static_cast<size_t>(d.b * d.s * d.heads * d.hd));
  if (lse) lse->assign(static_cast<size_t>(d.b * d.heads * d.s), 0.0);
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t i = 0; i < d.s; ++i) {
        auto q = [&](int64_t t, int64_t e) { return x[(b * d.s + t) * ldq + h * 3 * d.hd + e]; };
        std::vector<double> sc(static_cast<size_t>(i + 1));
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d.hd; ++e) dot += q(i, e) * q(j, d.hd + e);
          sc[j] = dot / std::sqrt(static_cast<double>(d.hd));
          mx = std::max(mx, sc[j]);
        }
        double sum = 0;
        for (auto& v : sc) sum += (v = std::exp(v - mx));
        if (lse) (*lse)[static_cast<size_t>((b * d.heads + h) * d.s + i)] = mx + std::log(sum);
        for (int64_t j = 0; j <= i; ++j) {
          sc[j] /= sum;
          const uint64_t idx = static_cast<uint64_t>(((b * d.heads + h) * d.s + i) * d.s + j);
          if (p > 0) sc[j] = dropout_keep(rng, idx, static_cast<float>(p)) ? sc[j] / (1 - p) : 0;
        }
        for (int64_t e = 0; e < d.hd; ++e) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j) o += sc[j] * q(j, 2 * d.hd + e);
          out[(b * d.s + i) * d.heads * d.hd + h * d.hd + e] = o;
        }
      }
  return out;
}

struct Fwd {
  Tensor out, stats;
};
Fwd forward(Backend& be, const Tensor& qkv, Dims d, double p, RngStream rng) {
  Fwd f{be.alloc({d.b, d.s, d.heads * d.hd}, qkv.dtype()),
        be.alloc({d.b, d.heads, d.s}, acc_dtype(qkv.dtype()))};
  be.attention_forward(f.out, f.stats, qkv, d.heads, p, rng);
  return f;
}

}  // namespace

TEST_CASE("attention_forward matches a naive reference - stats are each row's log-sum-exp") {
  auto be = make_cpu_backend(2);
  const RngStream rng{1234, 77};
  // s = 70 spans two of the kernel's 64-row blocks.
  for (Dims d : {Dims{2, 5, 3, 4}, Dims{1, 70, 2, 8}}) {
    for (double p : {0.0, 0.25}) {
      INFO("s " << d.s << " p " << p);
      Tensor qkv = random_tensor({d.b, d.s, d.heads * 3 * d.hd}, DType::kF64, 1, -2.0, 2.0);
      std::vector<double> want_lse;
      const auto want = naive_attention(qkv, d, p, rng, &want_lse);
      Fwd f = forward(*be, qkv, d, p, rng);
      REQUIRE(f.stats.shape() == Shape{d.b, d.heads, d.s});
      const auto got = to_vec(f.out), lse = to_vec(f.stats);
      for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(want[i]).margin(1e-12));
      for (size_t i = 0; i < lse.size(); ++i) REQUIRE(lse[i] == Approx(want_lse[i]).margin(1e-13));
    }
  }
}

TEST_CASE("attention is causal: later tokens do not change earlier outputs") {
  auto be = make_cpu_backend(2);
  const Dims d{2, 9, 2, 4};
  const int64_t c = d.heads * d.hd;
  Tensor qkv = random_tensor({d.b, d.s, 3 * c}, DType::kF32, 2);
  Fwd f1 = forward(*be, qkv, d, 0.1, {5, 0});
  const int64_t cut = 4;
  Tensor changed = clone(qkv);
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t t = cut + 1; t < d.s; ++t)
      for (int64_t e = 0; e < 3 * c; ++e)
        changed.data_as<float>()[(b * d.s + t) * 3 * c + e] += 1.5f;
  Fwd f2 = forward(*be, changed, d, 0.1, {5, 0});
  const auto o1 = to_vec(f1.out), o2 = to_vec(f2.out);
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t t = 0; t < d.s; ++t)
      for (int64_t e = 0; e < c; ++e) {
        const size_t i = static_cast<size_t>((b * d.s + t) * c + e);
        if (t <= cut) REQUIRE(o1[i] == o2[i]);
      }
  CHECK_FALSE(bitwise_equal(f1.out, f2.out));  // the later positions did change
}

TEST_CASE("attention_backward matches finite differences - with and without dropout") {
  auto be = make_cpu_backend(2);
  const RngStream rng{99, 1000};
  for (Dims d : {Dims{2, 6, 2, 3}, Dims{1, 67, 1, 4}}) {
    for (double p : {0.0, 0.3}) {
      INFO("s " << d.s << " p " << p);
      Tensor qkv = random_tensor({d.b, d.s, d.heads * 3 * d.hd}, DType::kF64, 3, -1.5, 1.5);
      Tensor wt = random_tensor({d.b, d.s, d.heads * d.hd}, DType::kF64, 4);
      Fwd f = forward(*be, qkv, d, p, rng);
      Tensor dqkv = random_tensor(qkv.shape(), DType::kF64, 5);  // garbage: overwritten
      be->attention_backward(dqkv, wt, qkv, f.out, f.stats, d.heads, p, rng);
      check_gradient([&] { return forward(*be, qkv, d, p, rng).out; }, wt, qkv, dqkv, "dqkv", 1e-6,
                     1e-9, 1e-6, 600);
    }
  }
}

TEST_CASE("attention f32 agrees with f64 - 1 and 2 threads are bitwise identical") {
  auto be1 = make_cpu_backend(1);
  auto be2 = make_cpu_backend(2);
  const Dims d{2, 130, 3, 16};
  const RngStream rng{7, 0};
  Tensor qkv = random_tensor({d.b, d.s, d.heads * 3 * d.hd}, DType::kF64, 6, -1.0, 1.0);
  Tensor dout = random_tensor({d.b, d.s, d.heads * d.hd}, DType::kF64, 7);
  auto run = [&](Backend& be, DType dt, Tensor& dqkv) {
    Tensor q = convert(qkv, dt);
    Fwd f = forward(be, q, d, 0.1, rng);
    dqkv = be.alloc(qkv.shape(), dt);
    be.attention_backward(dqkv, convert(dout, dt), q, f.out, f.stats, d.heads, 0.1, rng);
    return f;
  };
  Tensor g64, g32, g32b;
  const Fwd f64 = run(*be2, DType::kF64, g64), f32 = run(*be2, DType::kF32, g32),
            f32b = run(*be1, DType::kF32, g32b);
  // Scores are O(1) sums of 16 products; float softmax and the s-long products add errors of
  // ~1e-6 on O(1) outputs, ~1e-5 on gradients summed over 130 positions.
  CHECK(max_abs_diff(f32.out, f64.out) < 2e-5);
  CHECK(max_abs_diff(f32.stats, f64.stats) < 2e-6);
  CHECK(max_abs_diff(g32, g64) < 1e-4);
  CHECK(bitwise_equal(f32.out, f32b.out));
  CHECK(bitwise_equal(f32.stats, f32b.stats));
  CHECK(bitwise_equal(g32, g32b));
}

TEST_CASE("attention_backward recomputes the softmax from the saved statistics") {
  // Backward reads the softmax only through stats: shifting one row's log-sum-exp scales that
  // row's recomputed probabilities, so the gradient must change (a backward that ignored stats,
  // or read stale [s, s] memory, would not notice).
  auto be = make_cpu_backend(2);
  const Dims d{1, 9, 2, 4};
  const RngStream rng{3, 0};
  for (DType dt : {DType::kF64, DType::kF32, DType::kBF16, DType::kF16}) {
    INFO(dtype_name(dt));
    Tensor qkv = convert(random_tensor({d.b, d.s, d.heads * 3 * d.hd}, DType::kF64, 8), dt);
    Tensor dout = convert(random_tensor({d.b, d.s, d.heads * d.hd}, DType::kF64, 9), dt);
    Fwd f = forward(*be, qkv, d, 0.0, rng);
    Tensor g1 = be->alloc(qkv.shape(), dt), g2 = be->alloc(qkv.shape(), dt);
    be->attention_backward(g1, dout, qkv, f.out, f.stats, d.heads, 0.0, rng);
    Tensor again = be->alloc(qkv.shape(), dt);
    be->attention_backward(again, dout, qkv, f.out, f.stats, d.heads, 0.0, rng);
    CHECK(bitwise_equal(g1, again));
    Tensor shifted = clone(f.stats);
    if (dt == DType::kF64)
      shifted.data_as<double>()[d.s + 5] += 0.5;  // head 1, row 5
    else
      shifted.data_as<float>()[d.s + 5] += 0.5f;
    be->attention_backward(g2, dout, qkv, f.out, shifted, d.heads, 0.0, rng);
    CHECK_FALSE(bitwise_equal(g1, g2));
    // A statistics tensor of the wrong dtype or size is refused, naming it.
    Tensor wrong = be->alloc({d.b, d.heads, d.s, d.s}, acc_dtype(dt));
    CHECK_THROWS_WITH(be->attention_backward(g2, dout, qkv, f.out, wrong, d.heads, 0.0, rng),
                      Catch::Contains("stats"));
  }
}
