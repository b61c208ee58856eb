// cuDNN's fused attention (MTNLG_CUDA_ATTENTION=cudnn, core/cuda/cudnn_attention.h) on the GPU:
// without dropout against the CPU twin; with dropout by what its mask must be (cuDNN draws its
// own, not the CPU's): each element kept or dropped, kept ones scaled by 1 / (1 - p), the keep
// rate 1 - p within the statistics of the sample, the same mask for a seed and another for
// another stream or offset, and backward using forward's mask. Needs a GPU (exit 77: skipped).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/cuda/twin_check.h"
#include "tests/test_util.h"

namespace mtnlg::test {
namespace {

TEST_CASE("cuDNN attention without dropout matches the CPU, forward and backward") {
  ScopedEnv env("MTNLG_CUDA_ATTENTION", "cudnn");
  const DType dt = GENERATE(DType::kBF16, DType::kF16);
  const int64_t s = GENERATE(128, 300);       // 300: not a multiple of cuDNN's 64-row tiles
  const int64_t hd = GENERATE(64, 128, 160);  // 160: the 530B recipe's head size
  INFO(dtype_name(dt) << ", s " << s << ", hd " << hd);
  Twin tw;
  const int64_t b = 2, heads = 3;
  const RngStream rng{42, 3, 0};
  const Tensor qkv = random_tensor({b, s, heads * 3 * hd}, dt, 1, -2.0, 2.0);
  const Tensor dout = random_tensor({b, s, heads * hd}, dt, 2);
  const DType at = acc_dtype(dt);
  Tensor o = Tensor::cpu({b, s, heads * hd}, dt), l = Tensor::cpu({b, heads, s}, at);
  tw.cpu->attention_forward(o, l, qkv, heads, 0.0, rng);
  Tensor dq = Tensor::cpu(qkv.shape(), dt);
  tw.cpu->attention_backward(dq, dout, qkv, o, l, heads, 0.0, rng);

  Tensor qg = tw.dev(qkv), dog = tw.dev(dout);
  Tensor o_g = tw.gpu->alloc(o.shape(), dt), l_g = tw.gpu->alloc(l.shape(), at);
  tw.gpu->attention_forward(o_g, l_g, qg, heads, 0.0, rng);
  // The same bounds as the other kernels' (backend_twin_test.cc): the statistics are the
  // log-sum-exps of the scaled causal scores, so any backward can continue from this forward.
  expect_close(tw.host(l_g), l, 4096, "cuDNN attention stats (log-sum-exp)");
  expect_close(tw.host(o_g), o, 4, "cuDNN attention out", Scale::kMax);
  Tensor dq_g = tw.gpu->alloc(qkv.shape(), dt);
  tw.gpu->attention_backward(dq_g, dog, qg, o_g, l_g, heads, 0.0, rng);
  expect_close(tw.host(dq_g), dq, 8, "cuDNN attention dqkv", Scale::kMax);
}

// q = k = 0 makes every causal row uniform (P_ij = 1 / (i + 1), j <= i); v_j = e_j (s = hd) makes
// out_i[j] = P_ij * keep_ij / (1 - p): forward's output is its dropout mask, element by element.
struct MaskProbe {
  int64_t b = 4, heads = 4, s = 64, hd = 64;
  Tensor qkv;
  explicit MaskProbe(DType dt) : qkv(Tensor::cpu({b, s, heads * 3 * hd}, DType::kF32)) {
    float* x = qkv.data_as<float>();
    for (int64_t i = 0; i < qkv.numel(); ++i) x[i] = 0.0f;
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t t = 0; t < s; ++t)
        for (int64_t h = 0; h < heads; ++h) x[((bi * s + t) * heads + h) * 3 * hd + 2 * hd + t] = 1;
    Tensor narrow = Tensor::cpu(qkv.shape(), dt);
    make_cpu_backend()->copy(narrow, qkv);
    qkv = narrow;
  }
};

TEST_CASE("cuDNN attention dropout: a kept-or-dropped mask, scaled, at the keep rate, per seed") {
  ScopedEnv env("MTNLG_CUDA_ATTENTION", "cudnn");
  const double p = 0.2;
  const DType dt = DType::kBF16;
  MaskProbe probe(dt);
  const int64_t b = probe.b, heads = probe.heads, s = probe.s, hd = probe.hd;
  Twin tw;
  Tensor qg = tw.dev(probe.qkv);
  const auto forward = [&](RngStream rng) {
    Tensor o = tw.gpu->alloc({b, s, heads * hd}, dt),
           st = tw.gpu->alloc({b, heads, s}, DType::kF32);
    tw.gpu->attention_forward(o, st, qg, heads, p, rng);
    return std::pair{tw.host(o), st};
  };
  const RngStream rng{7, 11, 0};
  auto [o1, st1] = forward(rng);
  const auto out = to_vec(o1);
  int64_t kept = 0, total = 0;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = 0; j < hd; ++j) {
          const double v = out[static_cast<size_t>(((bi * s + i) * heads + h) * hd + j)];
          if (j > i) {
            REQUIRE(v == 0.0);  // above the diagonal: masked, whatever the dropout
            continue;
          }
          const double scaled = 1.0 / ((1.0 - p) * static_cast<double>(i + 1));
          INFO("b " << bi << " row " << i << " head " << h << " col " << j << ": " << v);
          // Either dropped (0) or kept and scaled by 1 / (1 - p): within one bf16 rounding.
          REQUIRE((v == 0.0 || std::abs(v - scaled) <= scaled / 128));
          kept += v != 0.0;
          ++total;
        }
  // 33,280 elements: the keep rate's standard deviation is sqrt(p (1 - p) / n) = 0.0022; 5.5 of
  // them is 0.012.
  const double rate = static_cast<double>(kept) / static_cast<double>(total);
  INFO("keep rate " << rate << " over " << total << " elements");
  CHECK(std::abs(rate - (1.0 - p)) < 0.012);

  // The same seed and stream: the same mask; another stream: another.
  auto [o2, st2] = forward(rng);
  CHECK(bitwise_equal(o1, o2));
  auto [o3, st3] = forward(RngStream{7, 12, 0});
  CHECK_FALSE(bitwise_equal(o1, o3));
  // Another offset, another mask: the plan reads the call's offset (core/cuda/cudnn_attention.cc
  // store_seed_offset, written on the stream by value).
  auto [o4, st4] = forward(RngStream{7, 11, 1 << 20});
  CHECK_FALSE(bitwise_equal(o1, o4));

  // Backward applies forward's mask: dV_j = sum_i P_ij keep_ij / (1 - p) dO_i, with P_ij keep_ij
  // / (1 - p) read off forward's output (out_i[j]).
  const Tensor dout = random_tensor({b, s, heads * hd}, dt, 5);
  Tensor dq = tw.gpu->alloc(probe.qkv.shape(), dt);
  Tensor og = tw.dev(o1);
  tw.gpu->attention_backward(dq, tw.dev(dout), qg, og, st1, heads, p, rng);
  const auto d = to_vec(tw.host(dq)), g = to_vec(dout);
  double worst = 0;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < s; ++j)
        for (int64_t c = 0; c < hd; ++c) {
          double want = 0, scale = 0;
          for (int64_t i = j; i < s; ++i) {
            const double pk = out[static_cast<size_t>(((bi * s + i) * heads + h) * hd + j)];
            const double go = g[static_cast<size_t>(((bi * s + i) * heads + h) * hd + c)];
            want += pk * go;
            scale += std::abs(pk * go);
          }
          const double got =
              d[static_cast<size_t>(((bi * s + j) * heads + h) * 3 * hd + 2 * hd + c)];
          worst = std::max(worst, std::abs(got - want) / (scale + 1e-3));
        }
  INFO("dV against forward's mask: worst error " << worst << " of the terms' magnitude");
  CHECK(worst < 0.02);  // bf16 probabilities and dO: a few roundings of the terms
}

TEST_CASE("cuDNN attention is bit-reproducible run to run - forward and backward") {
  ScopedEnv env("MTNLG_CUDA_ATTENTION", "cudnn");
  Twin tw;
  check_attention_reruns_bitwise(tw, 2, 300, 2, 64);
}

}  // namespace
}  // namespace mtnlg::test
