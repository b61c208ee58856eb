// Dropout on the CPU: the mask is core/rng.h's dropout_keep, kept fraction ~ 1 - p, forward and
// backward use the same mask, offsets and sub-streams change it, the backward is the gradient,
// aliasing, p = 0, bad p, 1 vs 2 threads.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/backend.h"
#include "core/kernels/dropout_math.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;

TEST_CASE("dropout_keep_bits is dropout_keep on the same bits") {
  const RngStream s{42, 3, 1001};
  for (uint64_t i = 0; i < 20000; ++i)
    REQUIRE(kernels::dropout_keep_bits(rng_bits(s, i), 0.3f) == dropout_keep(s, i, 0.3f));
  CHECK(kernels::dropout_scale(0.2) == Approx(1.25));
}

// The integer threshold the FA2-style kernels compare with is the float comparison's decision
// for every 32-bit word: around each threshold exhaustively (its 256 words and the next), and
// for random words; at p = 0 (all kept), the recipes' 0.1, p whose p * 2^24 is a whole number
// (the threshold exactly), just above and below those, and the largest float below 1.
TEST_CASE("dropout_threshold decides as dropout_keep_bits for every word") {
  std::vector<float> ps = {
      0.0f, 0.1f, 0.2f, 0.25f, 0.5f, 0.9f, 1.0f / 16777216.0f, 3e-8f, std::nextafter(1.0f, 0.0f)};
  for (const float q : {0.25f, 0.5f, 0.125f, 0.1f})
    for (const float p : {std::nextafter(q, 0.0f), std::nextafter(q, 1.0f)}) ps.push_back(p);
  std::mt19937 gen(5);
  for (const float p : ps) {
    INFO("p " << p);
    const uint32_t t = kernels::dropout_threshold(p);
    int bad = 0;
    for (int64_t d = -512; d < 512; ++d) {
      const int64_t w = static_cast<int64_t>(t) + d;
      if (w < 0 || w > 0xFFFFFFFFll) continue;
      const auto bits = static_cast<uint32_t>(w);
      bad += kernels::dropout_keep_bits(bits, p) != (bits >= t);
    }
    for (int i = 0; i < 100000; ++i) {
      const uint32_t bits = gen();
      bad += kernels::dropout_keep_bits(bits, p) != (bits >= t);
    }
    CHECK(bad == 0);
  }
  CHECK(kernels::dropout_threshold(0.0f) == 0u);
}

// Backend::dropout_add, the residual connection a layer makes twice, is dropout_forward then add
// (the CPU backend's default: these are the bits the CUDA backend's fused kernel is held to), in
// place over x too; p = 0 is add alone; y over the residual is refused naming it.
TEST_CASE("dropout_add is dropout_forward then add - in place too") {
  auto be = make_cpu_backend(2);
  const int64_t n = 1001;
  const RngStream rng{9, 2, 5};
  for (const DType dt : {DType::kF32, DType::kBF16}) {
    Tensor x = be->alloc({n}, dt), res = be->alloc({n}, dt);
    Tensor xf = be->alloc({n}, DType::kF32), rf = be->alloc({n}, DType::kF32);
    for (int64_t i = 0; i < n; ++i) {
      xf.data_as<float>()[i] = std::sin(0.37f * static_cast<float>(i));
      rf.data_as<float>()[i] = std::cos(0.11f * static_cast<float>(i));
    }
    be->copy(x, xf);
    be->copy(res, rf);
    for (const double p : {0.0, 0.25}) {
      Tensor two = be->alloc({n}, dt), fused = be->alloc({n}, dt), in_place = be->alloc({n}, dt);
      be->dropout_forward(two, x, p, rng);
      be->add(two, res, two);
      be->dropout_add(fused, x, res, p, rng);
      CHECK(bitwise_equal(fused, two));
      be->copy(in_place, x);
      be->dropout_add(in_place, in_place, res, p, rng);
      CHECK(bitwise_equal(in_place, two));
    }
    CHECK_THROWS_WITH(be->dropout_add(res, x, res, 0.1, rng),
                      Catch::Contains("dropout_add: y aliases residual"));
  }
}

TEST_CASE("dropout keeps ~1-p - scales kept values - and matches dropout_keep") {
  auto be = make_cpu_backend(2);
  const int64_t n = 1 << 20;
  const double p = 0.3;
  const RngStream rng{7, 1, 12345};
  Tensor in = be->alloc({n}, DType::kF32);
  be->fill(in, 2.0);
  Tensor out = be->alloc({n}, DType::kF32);
  be->dropout_forward(out, in, p, rng);
  int64_t kept = 0;
  const float* o = out.data_as<float>();
  for (int64_t i = 0; i < n; ++i) {
    const bool k = dropout_keep(rng, static_cast<uint64_t>(i), static_cast<float>(p));
    REQUIRE(o[i] == (k ? 2.0f * static_cast<float>(1.0 / (1.0 - p)) : 0.0f));
    kept += k;
  }
  // Binomial: std of the fraction is sqrt(p(1-p)/n) ~ 4.5e-4; 0.003 is ~7 sigma.
  CHECK(std::abs(static_cast<double>(kept) / n - (1 - p)) < 0.003);
}

TEST_CASE("dropout backward reuses the forward mask - other offsets and streams differ") {
  auto be = make_cpu_backend(2);
  const int64_t n = 4099;
  const RngStream rng{9, 0, 64};
  Tensor in = random_tensor({n}, DType::kF64, 1, 0.5, 1.5);  // never 0: zeros mean dropped
  Tensor out = be->alloc({n}, DType::kF64);
  be->dropout_forward(out, in, 0.5, rng);
  Tensor ones = be->alloc({n}, DType::kF64);
  be->fill(ones, 1.0);
  Tensor din = be->alloc({n}, DType::kF64);
  be->dropout_backward(din, ones, 0.5, rng);
  const auto vo = to_vec(out), vd = to_vec(din);
  for (size_t i = 0; i < vo.size(); ++i) REQUIRE((vo[i] != 0.0) == (vd[i] != 0.0));

  Tensor shifted = be->alloc({n}, DType::kF64), other_stream = be->alloc({n}, DType::kF64);
  be->dropout_forward(shifted, in, 0.5, {9, 0, 64 + static_cast<uint64_t>(n)});
  be->dropout_forward(other_stream, in, 0.5, {9, 1, 64});
  CHECK_FALSE(bitwise_equal(shifted, out));
  CHECK_FALSE(bitwise_equal(other_stream, out));
  // Same seed and offset again: identical.
  Tensor again = be->alloc({n}, DType::kF64);
  be->dropout_forward(again, in, 0.5, rng);
  CHECK(bitwise_equal(again, out));
}

TEST_CASE("dropout backward is the gradient of forward - aliasing - p = 0 - bad p") {
  auto be = make_cpu_backend(2);
  const int64_t n = 500;
  const RngStream rng{3, 2, 0};
  Tensor in = random_tensor({n}, DType::kF64, 2), wt = random_tensor({n}, DType::kF64, 3);
  Tensor din = be->alloc({n}, DType::kF64);
  be->dropout_backward(din, wt, 0.4, rng);
  check_gradient(
      [&] {
        Tensor o = be->alloc({n}, DType::kF64);
        be->dropout_forward(o, in, 0.4, rng);
        return o;
      },
      wt, in, din, "din");
  Tensor inplace = clone(wt);
  be->dropout_backward(inplace, inplace, 0.4, rng);
  CHECK(bitwise_equal(inplace, din));
  Tensor same = be->alloc({n}, DType::kF64);
  be->dropout_forward(same, in, 0.0, rng);
  CHECK(bitwise_equal(same, in));
  CHECK_THROWS_AS(be->dropout_forward(same, in, 1.0, rng), Error);
  CHECK_THROWS_AS(be->dropout_forward(same, in, -0.1, rng), Error);
}

TEST_CASE("dropout is bitwise identical on 1 and 2 threads") {
  auto be1 = make_cpu_backend(1);
  auto be2 = make_cpu_backend(2);
  Tensor in = random_tensor({100001}, DType::kF32, 4);
  Tensor o1 = be1->alloc({100001}, DType::kF32), o2 = be2->alloc({100001}, DType::kF32);
  be1->dropout_forward(o1, in, 0.1, {5, 0, 3});
  be2->dropout_forward(o2, in, 0.1, {5, 0, 3});
  CHECK(bitwise_equal(o1, o2));
}

// Backend::set_rng_stream_base: every draw's sub-stream moves by the base (dropout forward, add
// and backward, attention's dropout) until set back to 0, read when a call runs, so a captured
// call replays with the base set then (model/captured_micro_batch.h).
TEST_CASE(
    "set_rng_stream_base moves each call's sub-stream - dropout and attention - replays too") {
  auto be = make_cpu_backend(2);
  const int64_t n = 4099;
  const uint64_t base = uint64_t{7} << 20;
  const RngStream rng{9, 3, 64}, moved{9, 3 + base, 64};
  for (const DType dt : {DType::kF32, DType::kBF16}) {
    INFO(dtype_name(dt));
    Tensor in = be->alloc({n}, dt), res = be->alloc({n}, dt);
    be->copy(in, random_tensor({n}, DType::kF32, 1, 0.5, 1.5));
    be->copy(res, random_tensor({n}, DType::kF32, 2));
    const auto three = [&](RngStream r) {
      std::vector<Tensor> out = {be->alloc({n}, dt), be->alloc({n}, dt), be->alloc({n}, dt)};
      be->dropout_forward(out[0], in, 0.3, r);
      be->dropout_add(out[1], in, res, 0.3, r);
      be->dropout_backward(out[2], in, 0.3, r);
      return out;
    };
    const auto plain = three(rng), expected = three(moved);
    be->set_rng_stream_base(base);
    const auto based = three(rng);
    be->set_rng_stream_base(0);
    const auto after = three(rng);
    for (size_t k = 0; k < 3; ++k) {
      INFO("call " << k);
      CHECK(bitwise_equal(based[k], expected[k]));
      CHECK_FALSE(bitwise_equal(based[k], plain[k]));
      CHECK(bitwise_equal(after[k], plain[k]));
    }
    // Attention's dropout (forward and backward) draws from the moved stream too.
    const int64_t b = 2, s = 16, heads = 2, hd = 8;
    Tensor qkv = be->alloc({b, s, 3 * heads * hd}, dt);
    be->copy(qkv, random_tensor({b, s, 3 * heads * hd}, DType::kF32, 3));
    Tensor dout = be->alloc({b, s, heads * hd}, dt);
    be->copy(dout, random_tensor({b, s, heads * hd}, DType::kF32, 4));
    const auto attend = [&](RngStream r) {
      std::vector<Tensor> t = {be->alloc({b, s, heads * hd}, dt),
                               be->alloc({b, heads, s}, acc_dtype(dt)),
                               be->alloc({b, s, 3 * heads * hd}, dt)};
      be->attention_forward(t[0], t[1], qkv, heads, 0.3, r);
      be->attention_backward(t[2], dout, qkv, t[0], t[1], heads, 0.3, r);
      return t;
    };
    const auto a_plain = attend(rng), a_expected = attend(moved);
    be->set_rng_stream_base(base);
    const auto a_based = attend(rng);
    // A recorded call reads the base when replayed, not when recorded.
    Tensor replayed = be->alloc({n}, dt);
    be->set_rng_stream_base(0);
    auto work = be->capture([&] { be->dropout_forward(replayed, in, 0.3, rng); });
    be->set_rng_stream_base(base);
    work->replay();
    be->set_rng_stream_base(0);
    CHECK(bitwise_equal(replayed, expected[0]));
    for (size_t k : {size_t{0}, size_t{2}}) {
      INFO("attention " << k);
      CHECK(bitwise_equal(a_based[k], a_expected[k]));
      CHECK_FALSE(bitwise_equal(a_based[k], a_plain[k]));
    }
  }
}
