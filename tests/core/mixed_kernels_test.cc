// The CPU kernels on bf16 and fp16 tensors (a mixed-precision model's activations and weights)
// against the same kernels in f64 on the same numbers.
//
// The bound. Inputs are bf16 values, which f64 holds exactly, so the f64 run is the exact result
// up to f64 rounding. The bf16 kernels widen to fp32, compute, and round once on write:
// - a bf16 output is off by its rounding, at most u = 2^-8 of its value (unit roundoff of an
//   8-bit significand; fp16: u = 2^-11, 11 bits), plus the fp32 arithmetic before it;
// - the fp32 arithmetic is a row of at most c terms summed in fp32: gamma(c) ~ c * 2^-24 of the
//   sum of magnitudes, at most ~1e-5 of the largest value here (c <= 96, magnitudes O(10)).
// So each element must satisfy |got - ref| <= u |ref| + 1e-5 max|ref| (fp32 outputs: the
// second term only). Backward kernels get the bf16 forward's saved tensors (mean, rstd),
// converted exactly to f64, so both runs see the same inputs; attention's backward recomputes its
// softmax from each run's own saved log-sum-exps (fp32 against f64: within the fp32 slack).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "core/backend.h"
#include "core/cpu/attention_bf16.h"
#include "core/rng.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;

namespace {

constexpr double kFp32Slack = 1e-5;

// Unit roundoff of a stored dtype (0: fp32 or wider, whose error is the fp32 slack).
double unit_roundoff(DType dtype) {
  return dtype == DType::kBF16 ? 1.0 / 256 : dtype == DType::kF16 ? 1.0 / 2048 : 0.0;
}

// The bound above, element by element, plus extra[i] where given (the error of operands a kernel
// rounds before a product; see attention's test); returns the number of elements outside it.
int64_t outside_bound(const Tensor& got, const Tensor& ref, const std::vector<double>& extra = {}) {
  REQUIRE(got.numel() == ref.numel());
  const auto g = to_vec(got), r = to_vec(ref);
  double scale = 0.0;
  for (double v : r) scale = std::max(scale, std::abs(v));
  const double rel = unit_roundoff(got.dtype());
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double bound = rel * std::abs(r[i]) + kFp32Slack * std::max(scale, 1e-30) +
                         (extra.empty() ? 0.0 : extra[i]);
    if (!(std::abs(g[i] - r[i]) <= bound)) {
      if (bad < 5) UNSCOPED_INFO("element " << i << ": got " << g[i] << ", want " << r[i]);
      ++bad;
    }
  }
  return bad;
}

// A narrow (bf16 or f16) tensor of random values and the same values in f64.
struct Pair {
  Tensor b, d;
};
Pair random_pair(DType D, const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Tensor b = random_tensor(shape, D, seed, lo, hi);
  return {b, convert(b, DType::kF64)};
}

// bf16 attention runs its products on bf16 operands (core/cpu/attention_bf16.cc): the probs
// (rounded once; with dropout, dropped and rounded again) into p v and into dv; the softmax
// gradient ds (rounded once) into dq and dk. A relative rounding of u in every
// operand of a sum of products moves it by at most u * (the sum of the products' magnitudes), so
// each element's extra bound is u * (roundings) * that sum, computed here in f64 from the same
// inputs: out: sum_j pd_ij |v_j|; dq: scale * sum_j |ds_ij| |k_j|; dk: scale * sum_i |ds_ij|
// |q_i|; dv: sum_i pd_ij |dout_i|. (Second-order terms, u^2, are far inside the fp32 slack.)
struct AttentionExtra {
  std::vector<double> out, dqkv;
};
AttentionExtra bf16_attention_extra(const Tensor& qkv, const Tensor& dout, int64_t heads, double p,
                                    RngStream rng) {
  const int64_t b = qkv.dim(0), s = qkv.dim(1), hd = qkv.dim(2) / (3 * heads);
  const int64_t ldq = heads * 3 * hd, ldo = heads * hd;
  const auto x = to_vec(qkv), dy = to_vec(dout);
  const double u = 1.0 / 256, scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const double keep_scale = p > 0 ? 1.0 / (1.0 - static_cast<float>(p)) : 1.0;
  const double pd_roundings = p > 0 ? 2 : 1;
  AttentionExtra e{std::vector<double>(dy.size(), 0.0), std::vector<double>(x.size(), 0.0)};
  std::vector<double> pd(s * s), ds(s * s), pr(s);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t bh = bi * heads + h;
      auto q = [&](int64_t i, int64_t d) { return x[(bi * s + i) * ldq + h * 3 * hd + d]; };
      auto k = [&](int64_t i, int64_t d) { return q(i, hd + d); };
      auto v = [&](int64_t i, int64_t d) { return q(i, 2 * hd + d); };
      auto g = [&](int64_t i, int64_t d) { return dy[(bi * s + i) * ldo + h * hd + d]; };
      for (int64_t i = 0; i < s; ++i) {
        // Row i's softmax, in f64.
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double sc = 0;
          for (int64_t d = 0; d < hd; ++d) sc += q(i, d) * k(j, d);
          pr[j] = sc * scale;
          mx = std::max(mx, pr[j]);
        }
        for (int64_t j = 0; j <= i; ++j) sum += (pr[j] = std::exp(pr[j] - mx));
        for (int64_t j = 0; j <= i; ++j) pr[j] /= sum;
        const uint64_t base = static_cast<uint64_t>((bh * s + i) * s);
        double dot = 0;
        std::vector<double> dp(i + 1);
        for (int64_t j = 0; j <= i; ++j) {
          const bool kept = p == 0 || dropout_keep(rng, base + j, static_cast<float>(p));
          const double pij = pr[j];
          pd[i * s + j] = kept ? pij * keep_scale : 0.0;
          double acc = 0;
          for (int64_t d = 0; d < hd; ++d) acc += g(i, d) * v(j, d);
          dp[j] = kept ? acc * keep_scale : 0.0;
          dot += dp[j] * pij;
        }
        for (int64_t j = 0; j <= i; ++j) ds[i * s + j] = pr[j] * (dp[j] - dot);
      }
      for (int64_t i = 0; i < s; ++i)
        for (int64_t d = 0; d < hd; ++d) {
          double o = 0, dq = 0, dk = 0, dv = 0;
          for (int64_t j = 0; j <= i; ++j) {
            o += pd[i * s + j] * std::abs(v(j, d));
            dq += std::abs(ds[i * s + j]) * std::abs(k(j, d));
          }
          for (int64_t r = i; r < s; ++r) {  // i as a key row: query rows r >= i
            dk += std::abs(ds[r * s + i]) * std::abs(q(r, d));
            dv += pd[r * s + i] * std::abs(g(r, d));
          }
          e.out[(bi * s + i) * ldo + h * hd + d] = u * pd_roundings * o;
          const int64_t row = (bi * s + i) * ldq + h * 3 * hd;
          e.dqkv[row + d] = u * scale * dq;
          e.dqkv[row + hd + d] = u * scale * dk;
          e.dqkv[row + 2 * hd + d] = u * pd_roundings * dv;
        }
    }
  return e;
}

}  // namespace

TEMPLATE_TEST_CASE("bf16/fp16 elementwise ops follow f64 within one rounding", "[bf16]", Bf16,
                   F16) {
  const DType D = dtype_of<TestType>();
  auto be = make_cpu_backend(2);
  const int64_t n = 3000, c = 96;
  auto [a, a64] = random_pair(D, {n / c, c}, 1);
  auto [b, b64] = random_pair(D, {n / c, c}, 2);
  auto [bias, bias64] = random_pair(D, {c}, 3);

  Tensor out = Tensor::cpu({n / c, c}, D), out64 = Tensor::cpu({n / c, c}, DType::kF64);
  be->add(out, a, b);
  be->add(out64, a64, b64);
  CHECK(outside_bound(out, out64) == 0);

  // axpy from the same (already rounded) numbers.
  out64 = convert(out, DType::kF64);
  be->axpy(out, a, -0.37);
  be->axpy(out64, a64, -0.37);
  CHECK(outside_bound(out, out64) == 0);

  Tensor x = clone(a), x64 = clone(a64);
  be->scale(x, 3.0);
  be->scale(x64, 3.0);
  CHECK(outside_bound(x, x64) == 0);

  Tensor y = clone(a), y64 = clone(a64);
  be->add_bias(y, bias);
  be->add_bias(y64, bias64);
  CHECK(outside_bound(y, y64) == 0);

  // The bias gradient of a bf16 layer accumulates into an fp32 main gradient.
  Tensor db = random_tensor({c}, DType::kF32, 4), db64 = convert(db, DType::kF64);
  be->bias_backward(db, a);
  be->bias_backward(db64, a64);
  CHECK(outside_bound(db, db64) == 0);
  Tensor wrong = Tensor::cpu({c}, D);
  CHECK_THROWS(be->bias_backward(wrong, a));  // a bf16 main gradient is a caller bug

  CHECK(be->sum_squares(a) == Approx(be->sum_squares(a64)).epsilon(1e-12));

  Tensor d = clone(a), d64 = clone(a64);
  const RngStream rng{7, 3, 0};
  be->dropout_forward(d, d, 0.25, rng);
  be->dropout_forward(d64, d64, 0.25, rng);
  CHECK(outside_bound(d, d64) == 0);
}

TEMPLATE_TEST_CASE("bf16/fp16 LayerNorm keeps fp32 statistics and fp32 parameter gradients",
                   "[bf16]", Bf16, F16) {
  const DType D = dtype_of<TestType>();
  auto be = make_cpu_backend(2);
  const int64_t n = 40, c = 96;
  // A mean far from zero: the two-pass variance must hold in fp32 from bf16 inputs.
  auto [in, in64] = random_pair(D, {n, c}, 11, 2.0, 4.0);
  auto [w, w64] = random_pair(D, {c}, 12, 0.5, 1.5);
  auto [b, b64] = random_pair(D, {c}, 13);
  Tensor out = Tensor::cpu({n, c}, D), out64 = Tensor::cpu({n, c}, DType::kF64);
  Tensor mean = Tensor::cpu({n}, DType::kF32), rstd = Tensor::cpu({n}, DType::kF32);
  Tensor mean64 = Tensor::cpu({n}, DType::kF64), rstd64 = Tensor::cpu({n}, DType::kF64);
  be->layernorm_forward(out, mean, rstd, in, w, b, 1e-5);
  be->layernorm_forward(out64, mean64, rstd64, in64, w64, b64, 1e-5);
  CHECK(outside_bound(out, out64) == 0);
  CHECK(outside_bound(mean, mean64) == 0);
  CHECK(outside_bound(rstd, rstd64) == 0);

  Tensor bf16_stats = Tensor::cpu({n}, D);
  CHECK_THROWS(be->layernorm_forward(out, bf16_stats, rstd, in, w, b, 1e-5));

  auto [dout, dout64] = random_pair(D, {n, c}, 14);
  auto [din, din64] = random_pair(D, {n, c}, 15);  // accumulates: the residual gradient
  Tensor dw = random_tensor({c}, DType::kF32, 16), dw64 = convert(dw, DType::kF64);
  Tensor db = random_tensor({c}, DType::kF32, 17), db64 = convert(db, DType::kF64);
  const Tensor m64 = convert(mean, DType::kF64), r64 = convert(rstd, DType::kF64);
  be->layernorm_backward(din, dw, db, dout, in, w, mean, rstd);
  be->layernorm_backward(din64, dw64, db64, dout64, in64, w64, m64, r64);
  CHECK(outside_bound(din, din64) == 0);
  CHECK(outside_bound(dw, dw64) == 0);
  CHECK(outside_bound(db, db64) == 0);
}

TEMPLATE_TEST_CASE("bf16/fp16 GeLU forward and backward", "[bf16]", Bf16, F16) {
  const DType D = dtype_of<TestType>();
  auto be = make_cpu_backend(2);
  auto [in, in64] = random_pair(D, {5000}, 21, -4.0, 4.0);
  auto [dout, dout64] = random_pair(D, {5000}, 22);
  for (Activation act : {Activation::kGelu, Activation::kGeluTanh}) {
    Tensor out = Tensor::cpu({5000}, D), out64 = Tensor::cpu({5000}, DType::kF64);
    be->gelu_forward(out, in, act);
    be->gelu_forward(out64, in64, act);
    CHECK(outside_bound(out, out64) == 0);
    Tensor din = clone(dout), din64 = clone(dout64);
    be->gelu_backward(din, din, in, act);
    be->gelu_backward(din64, din64, in64, act);
    CHECK(outside_bound(din, din64) == 0);
  }
}

TEMPLATE_TEST_CASE("bf16/fp16 attention: fp32 softmax and statistics, same dropout masks", "[bf16]",
                   Bf16, F16) {
  const DType D = dtype_of<TestType>();
  // s spans two of bf16's row blocks (128) and three of fp16's (64).
  const int64_t b = 2, s = 140, heads = 3, hd = 8;
  for (double p : {0.0, 0.2}) {
    INFO("dropout " << p);
    const RngStream rng{5, 9, 0};
    auto be = make_cpu_backend(2);
    auto [qkv, qkv64] = random_pair(D, {b, s, heads * 3 * hd}, 31, -2.0, 2.0);
    Tensor out = Tensor::cpu({b, s, heads * hd}, D);
    Tensor stats = Tensor::cpu({b, heads, s}, DType::kF32);
    Tensor out64 = Tensor::cpu({b, s, heads * hd}, DType::kF64);
    Tensor stats64 = Tensor::cpu({b, heads, s}, DType::kF64);
    be->attention_forward(out, stats, qkv, heads, p, rng);
    be->attention_forward(out64, stats64, qkv64, heads, p, rng);
    auto [dout, dout64] = random_pair(D, {b, s, heads * hd}, 32);
    // fp16 multiplies in fp32 (no extra bound); bf16 rounds its products' operands.
    const AttentionExtra extra =
        D == DType::kBF16 ? bf16_attention_extra(qkv64, dout64, heads, p, rng) : AttentionExtra{};
    CHECK(outside_bound(stats, stats64) == 0);
    CHECK(outside_bound(out, out64, extra.out) == 0);

    Tensor dqkv = Tensor::cpu(qkv.shape(), D);
    Tensor dqkv64 = Tensor::cpu(qkv.shape(), DType::kF64);
    be->attention_backward(dqkv, dout, qkv, out, stats, heads, p, rng);
    be->attention_backward(dqkv64, dout64, qkv64, out64, stats64, heads, p, rng);
    CHECK(outside_bound(dqkv, dqkv64, extra.dqkv) == 0);

    // Bitwise the same on one thread.
    auto one = make_cpu_backend(1);
    Tensor out1 = Tensor::cpu(out.shape(), D), stats1 = Tensor::cpu(stats.shape(), DType::kF32);
    Tensor dqkv1 = Tensor::cpu(qkv.shape(), D);
    one->attention_forward(out1, stats1, qkv, heads, p, rng);
    one->attention_backward(dqkv1, dout, qkv, out1, stats1, heads, p, rng);
    CHECK(bitwise_equal(out1, out));
    CHECK(bitwise_equal(stats1, stats));
    CHECK(bitwise_equal(dqkv1, dqkv));

    if (D == DType::kBF16) {
      // Problems taken one at a time (the scratch budget's smallest chunk) meet the same bounds.
      // Not the same bits: oneDNN picks its kernel by the batch it is given (on an AMX CPU, AMX
      // or AVX512-BF16 brgemm for one problem, its jit gemm for several), and they sum the
      // products in different orders.
      cpu::MatmulBf16 mm;
      Tensor outc = Tensor::cpu(out.shape(), D), statsc = Tensor::cpu(stats.shape(), DType::kF32);
      Tensor dqkvc = Tensor::cpu(qkv.shape(), D);
      cpu::attention_forward_bf16(mm, outc.data_as<Bf16>(), statsc.data_as<float>(),
                                  qkv.data_as<Bf16>(), b, s, heads, hd, static_cast<float>(p), rng,
                                  /*scratch_bytes=*/1);
      cpu::attention_backward_bf16(mm, dqkvc.data_as<Bf16>(), dout.data_as<Bf16>(),
                                   qkv.data_as<Bf16>(), statsc.data_as<float>(), b, s, heads, hd,
                                   static_cast<float>(p), rng, /*scratch_bytes=*/1);
      CHECK(outside_bound(statsc, stats64) == 0);
      CHECK(outside_bound(outc, out64, extra.out) == 0);
      CHECK(outside_bound(dqkvc, dqkv64, extra.dqkv) == 0);

      // The fp32 fallback an AVX2 CPU runs (forced here on any CPU): a problem a thread, its
      // operands widened once. The same bounds, and the same bits whether problems are staged
      // one at a time or many (its products do not depend on the chunk).
      cpu::MatmulBf16 fb({}, /*use_onednn=*/false);
      Tensor outf = Tensor::cpu(out.shape(), D), statsf = Tensor::cpu(stats.shape(), DType::kF32);
      Tensor dqkvf = Tensor::cpu(qkv.shape(), D);
      cpu::attention_forward_bf16(fb, outf.data_as<Bf16>(), statsf.data_as<float>(),
                                  qkv.data_as<Bf16>(), b, s, heads, hd, static_cast<float>(p), rng);
      cpu::attention_backward_bf16(fb, dqkvf.data_as<Bf16>(), dout.data_as<Bf16>(),
                                   qkv.data_as<Bf16>(), statsf.data_as<float>(), b, s, heads, hd,
                                   static_cast<float>(p), rng);
      CHECK(outside_bound(statsf, stats64) == 0);
      CHECK(outside_bound(outf, out64, extra.out) == 0);
      CHECK(outside_bound(dqkvf, dqkv64, extra.dqkv) == 0);
      Tensor outf1 = Tensor::cpu(out.shape(), D), statsf1 = Tensor::cpu(stats.shape(), DType::kF32);
      Tensor dqkvf1 = Tensor::cpu(qkv.shape(), D);
      cpu::attention_forward_bf16(fb, outf1.data_as<Bf16>(), statsf1.data_as<float>(),
                                  qkv.data_as<Bf16>(), b, s, heads, hd, static_cast<float>(p), rng,
                                  /*scratch_bytes=*/1);
      cpu::attention_backward_bf16(fb, dqkvf1.data_as<Bf16>(), dout.data_as<Bf16>(),
                                   qkv.data_as<Bf16>(), statsf1.data_as<float>(), b, s, heads, hd,
                                   static_cast<float>(p), rng, /*scratch_bytes=*/1);
      CHECK(bitwise_equal(outf1, outf));
      CHECK(bitwise_equal(statsf1, statsf));
      CHECK(bitwise_equal(dqkvf1, dqkvf));
      // And the bits of the batched bf16 staging with each product widened by MatmulBf16's
      // fallback: the same products, the same rounding of the probabilities and of ds.
      Tensor outb = Tensor::cpu(out.shape(), D), statsb = Tensor::cpu(stats.shape(), DType::kF32);
      Tensor dqkvb = Tensor::cpu(qkv.shape(), D);
      cpu::attention_forward_bf16(fb, outb.data_as<Bf16>(), statsb.data_as<float>(),
                                  qkv.data_as<Bf16>(), b, s, heads, hd, static_cast<float>(p), rng,
                                  cpu::kAttentionScratchBytes, cpu::AttentionBf16Path::kBatched);
      cpu::attention_backward_bf16(fb, dqkvb.data_as<Bf16>(), dout.data_as<Bf16>(),
                                   qkv.data_as<Bf16>(), statsb.data_as<float>(), b, s, heads, hd,
                                   static_cast<float>(p), rng, cpu::kAttentionScratchBytes,
                                   cpu::AttentionBf16Path::kBatched);
      CHECK(bitwise_equal(outb, outf));
      CHECK(bitwise_equal(statsb, statsf));
      CHECK(bitwise_equal(dqkvb, dqkvf));
    }
  }
}

TEMPLATE_TEST_CASE("bf16/fp16 embedding: bf16/fp16 rows, fp32 table gradients", "[bf16]", Bf16,
                   F16) {
  const DType D = dtype_of<TestType>();
  auto be = make_cpu_backend(2);
  const int64_t b = 3, s = 10, c = 72, vocab = 17;
  Tensor tokens = Tensor::cpu({b, s}, DType::kI32);
  for (int64_t i = 0; i < b * s; ++i)
    tokens.data_as<int32_t>()[i] = static_cast<int32_t>((i * 7) % vocab);
  auto [wte, wte64] = random_pair(D, {vocab, c}, 41);
  auto [wpe, wpe64] = random_pair(D, {s, c}, 42);
  Tensor out = Tensor::cpu({b, s, c}, D), out64 = Tensor::cpu({b, s, c}, DType::kF64);
  be->embedding_forward(out, tokens, wte, wpe);
  be->embedding_forward(out64, tokens, wte64, wpe64);
  CHECK(outside_bound(out, out64) == 0);

  auto [dout, dout64] = random_pair(D, {b, s, c}, 43);
  Tensor dwte = Tensor::cpu({vocab, c}, DType::kF32), dwpe = Tensor::cpu({s, c}, DType::kF32);
  Tensor dwte64 = Tensor::cpu({vocab, c}, DType::kF64), dwpe64 = Tensor::cpu({s, c}, DType::kF64);
  be->embedding_backward(dwte, dwpe, dout, tokens);
  be->embedding_backward(dwte64, dwpe64, dout64, tokens);
  CHECK(outside_bound(dwte, dwte64) == 0);
  CHECK(outside_bound(dwpe, dwpe64) == 0);
  Tensor bf16_table = Tensor::cpu({vocab, c}, D), bf16_pos = Tensor::cpu({s, c}, D);
  CHECK_THROWS(be->embedding_backward(bf16_table, bf16_pos, dout, tokens));
}

TEMPLATE_TEST_CASE("bf16/fp16 cross entropy: fp32 statistics, gradient rounded once", "[bf16]",
                   Bf16, F16) {
  const DType D = dtype_of<TestType>();
  auto be = make_cpu_backend(2);
  const int64_t n = 12, vp = 64, vocab = 61;
  auto [logits, logits64] = random_pair(D, {n, vp}, 51, -6.0, 6.0);
  Tensor targets = Tensor::cpu({n}, DType::kI32);
  for (int64_t i = 0; i < n; ++i)
    targets.data_as<int32_t>()[i] = static_cast<int32_t>((i * 13) % vocab);
  const double loss = be->cross_entropy_forward(logits, targets, vocab);
  const double loss64 = be->cross_entropy_forward(logits64, targets, vocab);
  // Per row: log-sum-exp of 61 terms in fp32 (relative ~61 * 2^-24), rows summed in double.
  CHECK(std::abs(loss - loss64) <= kFp32Slack * std::abs(loss64));

  Tensor d64 = Tensor::cpu({n, vp}, DType::kF64);
  be->cross_entropy_backward(d64, logits64, targets, vocab, 0.5);
  be->cross_entropy_backward(logits, logits, targets, vocab, 0.5);  // in place, as the model does
  CHECK(outside_bound(logits, d64) == 0);
  // The target's entry p - 1 is formed in fp32 and rounded once: within 2^-8 of itself.
  for (int64_t r = 0; r < n; ++r) {
    const int64_t i = r * vp + targets.data_as<int32_t>()[r];
    CHECK(std::abs(value_at(logits, i) - value_at(d64, i)) <=
          unit_roundoff(D) * std::abs(value_at(d64, i)) + 1e-7);
  }
}

TEST_CASE("fp16 conversions round to nearest even as the hardware does", "[bf16]") {
  // Every fp16 value widens exactly and rounds back to itself (NaNs stay NaNs).
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    _Float16 hw;
    std::memcpy(&hw, &bits, sizeof hw);
    const float f = f16_to_f32(bits);
    if (f != f) {
      REQUIRE(static_cast<float>(hw) != static_cast<float>(hw));
      continue;
    }
    REQUIRE(f == static_cast<float>(hw));
    REQUIRE(f32_to_f16(f) == bits);
  }
  // Floats from every exponent (subnormal halves, ties, overflow to inf) against the compiler's
  // IEEE conversion.
  for (uint64_t x = 0; x < (uint64_t{1} << 32); x += 4093) {
    const auto u = static_cast<uint32_t>(x);
    float f;
    std::memcpy(&f, &u, sizeof f);
    if (f != f) continue;
    const _Float16 hw = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &hw, sizeof want);
    INFO("float bits " << u);
    REQUIRE(f32_to_f16(f) == want);
  }
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00);          // the tie above the largest half: inf
  CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0);  // the tie below the smallest: even, zero
  CHECK(f32_to_f16(std::ldexp(1.5f, -25)) == 1);  // above the tie: the smallest subnormal
}

TEST_CASE("fp16 GEMM: fp32 products and sums of the fp16 operands", "[bf16]") {
  auto be = make_cpu_backend(2);
  const int64_t m = 37, n = 29, k = 70;
  auto [a, a64] = random_pair(DType::kF16, {m, k}, 61);
  auto [b, b64] = random_pair(DType::kF16, {n, k}, 62);
  for (DType cd : {DType::kF16, DType::kF32}) {
    INFO("c " << dtype_name(cd));
    Tensor c = random_tensor({m, n}, cd, 63), c64 = convert(c, DType::kF64);
    be->gemm(c, a, false, b, true, 0.5, 1.0);
    be->gemm(c64, a64, false, b64, true, 0.5, 1.0);
    CHECK(outside_bound(c, c64) == 0);
  }
}
