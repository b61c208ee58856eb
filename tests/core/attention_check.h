// What the FA2-style attention kernels' tests (tests/core/flash2_attention_test.cc) check with: a
// case, the kernels' results, and the check of those against the CPU backend in float64 and
// against the same program with its threads in another order.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>

#include "core/backend.h"
#include "core/rng.h"
#include "kernel_check.h"

namespace mtnlg::test {

struct AttentionCase {
  int64_t b, s, heads, hd;
};

struct AttentionResult {
  Tensor out, lse, dqkv;
};

// 1/sqrt(hd), the scores' scale, as the CUDA launchers take it.
inline float attention_score_scale(int64_t hd) {
  return 1.0f / std::sqrt(static_cast<float>(hd));
}

// run(c, qkv, dout, p, rng, reverse) -> AttentionResult: forward then backward, with `reverse`
// in another order of its threads (the wmma programs: each phase's threads reversed; the thread
// programs: warps one at a time between barriers, the last first). Checks the result against the
// CPU backend in float64 within the kernels' bounds, and that the reversed run gives the same bits
// (no races).
template <typename Run>
void check_attention_against_cpu(DType dt, const AttentionCase& c, double p, Run run) {
  INFO(dtype_name(dt) << " b " << c.b << " s " << c.s << " heads " << c.heads << " hd " << c.hd
                      << " dropout " << p);
  const RngStream rng{42, 3, 0};
  const Tensor qkv = random_tensor({c.b, c.s, c.heads * 3 * c.hd}, dt, 1, -2.0, 2.0);
  const Tensor dout = random_tensor({c.b, c.s, c.heads * c.hd}, dt, 2);
  const AttentionResult got = run(c, qkv, dout, p, rng, false);

  auto cpu = make_cpu_backend(1);
  const Tensor q64 = convert(qkv, DType::kF64), do64 = convert(dout, DType::kF64);
  Tensor out = Tensor::cpu({c.b, c.s, c.heads * c.hd}, DType::kF64);
  Tensor lse = Tensor::cpu({c.b, c.heads, c.s}, DType::kF64);
  cpu->attention_forward(out, lse, q64, c.heads, p, rng);
  Tensor dqkv = Tensor::cpu(q64.shape(), DType::kF64);
  cpu->attention_backward(dqkv, do64, q64, out, lse, c.heads, p, rng);

  const double u = dt == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048;
  // The log-sum-exps: fp32 sums of scores from the same narrow operands.
  CHECK(worst_roundings(got.lse, lse, 1.0 / (1 << 23)) < 16);  // measured: under 1
  // out: one rounding of its own plus the probabilities' (rounded before the product with v).
  CHECK(worst_roundings(got.out, out, u) < 2);  // measured: under 0.6
  // dqkv: probabilities and the softmax gradient rounded to the format before their products,
  // and delta from the rounded out.
  CHECK(worst_roundings(got.dqkv, dqkv, u) < 3);  // measured: under 1.2

  // Races: the same program with its threads in another order.
  const AttentionResult rev = run(c, qkv, dout, p, rng, true);
  CHECK(bitwise_equal(rev.out, got.out));
  CHECK(bitwise_equal(rev.lse, got.lse));
  CHECK(bitwise_equal(rev.dqkv, got.dqkv));
}

}  // namespace mtnlg::test
