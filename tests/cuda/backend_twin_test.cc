// Every CUDA Backend operation against its CPU twin (core/cpu/) on random inputs, in f64, f32,
// bf16 and fp16: f64/f32 within a few hundred roundings of accumulation-order noise, bf16/fp16
// within a few roundings of their format. Shapes are deliberately ragged (not multiples of a
// warp or block). Needs a GPU: without one the executable exits 77 (CTest: skipped).
#include <spdlog/spdlog.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda/device_overheads.h"
#include "core/cuda/pinned_staging.h"
#include "core/id_checks.h"
#include "core/kernels/adamw_math.h"
#include "tests/cuda/twin_check.h"
#include "tests/log_capture.h"
#include "tests/test_util.h"

namespace mtnlg::test {
namespace {

// Accumulation-order slack (in units of the stored format's roundoff) for wide dtypes, where
// one rounding is 1e-7 or less and the GPU's summation order differs from the CPU's.
double slack(DType dt, double narrow_ulps, double wide_ulps = 256) {
  return dt == DType::kBF16 || dt == DType::kF16 ? narrow_ulps : wide_ulps;
}

Tensor random_ids(const Shape& shape, int64_t limit, uint64_t seed) {
  Tensor t = Tensor::cpu(shape, DType::kI32);
  std::mt19937_64 gen(seed);
  // A small range so that ids repeat (the backward's scatter must add repeats in order).
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(limit - 1));
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<int32_t>()[i] = dist(gen);
  return t;
}

TEST_CASE("copy converts between f32, f64, bf16 and f16 on the device as the CPU does") {
  Twin tw;
  const DType types[] = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16};
  for (DType from : types) {
    const Tensor src = random_tensor({1001}, from, 11, -70000.0, 70000.0);
    for (DType to : types) {
      const bool narrow_pair = (from == DType::kBF16 && to == DType::kF16) ||
                               (from == DType::kF16 && to == DType::kBF16);
      if (narrow_pair) continue;  // the CPU twin refuses these (no model needs them)
      Tensor want = Tensor::cpu(src.shape(), to);
      tw.cpu->copy(want, src);
      Tensor got_dev = tw.gpu->alloc(src.shape(), to);
      tw.gpu->copy(got_dev, tw.dev(src));  // device -> device conversion
      Tensor got_up = tw.gpu->alloc(src.shape(), to);
      tw.gpu->copy(got_up, src);  // host -> device conversion
      Tensor got_down = Tensor::cpu(src.shape(), to);
      tw.gpu->copy(got_down, tw.dev(src));  // device -> host conversion
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      CHECK(bitwise_equal(tw.host(got_dev), want));
      CHECK(bitwise_equal(tw.host(got_up), want));
      CHECK(bitwise_equal(got_down, want));
    }
  }
}

TEST_CASE("fp8_cast and abs_max on the GPU are the CPU's bit for bit - both formats") {
  const DType dt = GENERATE(DType::kF32, DType::kBF16, DType::kF16, DType::kF64);
  Twin tw;
  // Ragged, scaled over the formats' whole range (subnormals, saturation), a NaN-free tensor
  // with its largest magnitude negative, and the scale applied before the rounding.
  Tensor x = random_tensor({41, 199}, dt, 11);
  tw.cpu->scale(x, 300.0);
  Tensor xg = tw.dev(x);
  CHECK(tw.gpu->abs_max(xg) == tw.cpu->abs_max(x));
  for (const Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2})
    for (const DType out_dt : {DType::kBF16, DType::kF32})
      for (const double scale : {1.0, 0.015625, 7.3e-3, 2.0e3}) {
        INFO("format " << static_cast<int>(f) << " out " << dtype_name(out_dt) << " scale "
                       << scale);
        Tensor qc = Tensor::cpu(x.shape(), out_dt), qg = tw.gpu->alloc(x.shape(), out_dt);
        const double ac = tw.cpu->fp8_cast(qc, x, scale, f);
        const double ag = tw.gpu->fp8_cast(qg, xg, scale, f);
        CHECK(ag == ac);
        CHECK(bitwise_equal(tw.host(qg), qc));
        // Without the read back: the same values, the amax raised in a device word.
        Tensor words = tw.gpu->alloc({2}, DType::kI32);
        tw.gpu->fill(words, 0.0);
        Tensor word = words.slice(1, 2), qa = tw.gpu->alloc(x.shape(), out_dt);
        tw.gpu->fp8_cast_accumulate(qa, xg, scale, f, word);
        tw.gpu->fp8_cast_accumulate(qa, xg, scale * 0.5, f, word);  // the same amax again
        CHECK(bitwise_equal(tw.host(qa), [&] {
          Tensor half = Tensor::cpu(x.shape(), out_dt);
          tw.cpu->fp8_cast(half, x, scale * 0.5, f);
          return half;
        }()));
        const Tensor got = tw.host(words);
        CHECK(got.data_as<int32_t>()[0] == 0);
        CHECK(static_cast<uint32_t>(got.data_as<int32_t>()[1]) == fp8_amax_bits(ac));
      }
  // In place (out aliasing in, bf16): the amax is the input's.
  if (dt == DType::kBF16) {
    Tensor yc = clone(x), yg = tw.dev(x);
    const double ac = tw.cpu->fp8_cast(yc, yc, 0.5, Fp8Format::kE4M3);
    CHECK(tw.gpu->fp8_cast(yg, yg, 0.5, Fp8Format::kE4M3) == ac);
    CHECK(bitwise_equal(tw.host(yg), yc));
  }
  Tensor empty = tw.gpu->alloc({0}, dt);
  CHECK(tw.gpu->abs_max(empty) == 0.0);
}

// gemm_fp8 on the GPU (the operands packed to FP8 bytes, cuBLASLt's FP8 GEMM) against the CPU's
// emulation (the bf16 GEMM of the same FP8 values): the products are exact in fp32 on both, so
// they differ by the order of fp32 sums alone. The operands are fp8_cast's outputs, in the three
// format pairs the linear layers use, every transpose, into bf16 (beta 0, the forward's) and f32
// (beta 1, the weight gradient's accumulation). Sizes multiples of 16 take cuBLASLt's kernels
// (no fallback warning); ragged ones fall back to the bf16 GEMM and say so once.
TEST_CASE("gemm_fp8 on the GPU equals the CPU's emulation in every transpose and format pair") {
  const bool ragged = GENERATE(false, true);
  const int64_t m = ragged ? 45 : 48, n = ragged ? 77 : 80, k = ragged ? 131 : 144;
  const std::pair<Fp8Format, Fp8Format> pairs[] = {{Fp8Format::kE4M3, Fp8Format::kE4M3},
                                                   {Fp8Format::kE5M2, Fp8Format::kE4M3},
                                                   {Fp8Format::kE4M3, Fp8Format::kE5M2}};
  LogCapture log;
  Twin tw;
  const auto scale_of = [](Fp8Format f) { return f == Fp8Format::kE4M3 ? 300.0 : 2000.0; };
  const auto cast = [&](const Shape& shape, Fp8Format f, uint64_t seed) {
    const Tensor x = random_tensor(shape, DType::kBF16, seed);
    Tensor q = Tensor::cpu(shape, DType::kBF16);
    tw.cpu->fp8_cast(q, x, scale_of(f), f);
    return q;
  };
  for (const auto& [fa, fb] : pairs)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (const DType ct : {DType::kBF16, DType::kF32}) {
          const Tensor a = cast(ta ? Shape{k, m} : Shape{m, k}, fa, 10 + ta);
          const Tensor b = cast(tb ? Shape{n, k} : Shape{k, n}, fb, 20 + tb);
          const double beta = ct == DType::kF32 ? 1.0 : 0.0;
          Tensor c_c = random_tensor({m, n}, ct, 30);
          Tensor c_g = tw.dev(c_c);
          const double alpha = 1.0 / (scale_of(fa) * scale_of(fb));
          tw.cpu->gemm_fp8(c_c, a, ta, b, tb, alpha, beta, fa, fb);
          Tensor ag = tw.dev(a), bg = tw.dev(b);
          tw.gpu->gemm_fp8(c_g, ag, ta, bg, tb, alpha, beta, fa, fb);
          INFO("formats " << static_cast<int>(fa) << "," << static_cast<int>(fb) << " trans_a "
                          << ta << " trans_b " << tb << " c " << dtype_name(ct));
          expect_close(tw.host(c_g), c_c, ct == DType::kF32 ? 512 : 2, "gemm_fp8");
        }
  const std::string said = log.text();
  INFO("log: " << said);
  const size_t first = said.find("gemm_fp8 [");
  CHECK((first != std::string::npos) == ragged);
  if (ragged) CHECK(said.find("gemm_fp8 [", first + 1) == std::string::npos);  // once
}

TEST_CASE("elementwise operations and reductions match the CPU") {
  const DType dt = GENERATE(DType::kF32, DType::kF64, DType::kBF16, DType::kF16);
  Twin tw;
  const Tensor a = random_tensor({37, 203}, dt, 1), b = random_tensor({37, 203}, dt, 2);
  const Tensor bias = random_tensor({203}, dt, 3);

  Tensor out_c = Tensor::cpu(a.shape(), dt), out_g = tw.gpu->alloc(a.shape(), dt);
  tw.cpu->add(out_c, a, b);
  Tensor ag = tw.dev(a), bg = tw.dev(b);
  tw.gpu->add(out_g, ag, bg);
  CHECK(bitwise_equal(tw.host(out_g), out_c));

  // Rows 1.. of each: not on a 16-byte boundary (203 elements a row), so element by element; the
  // whole tensors above take whole packs and a tail.
  Tensor part_c = Tensor::cpu({36, 203}, dt), part_g = tw.gpu->alloc({36, 203}, dt);
  tw.cpu->add(part_c, a.slice(1, 37), b.slice(1, 37));
  tw.gpu->add(part_g, ag.slice(1, 37), bg.slice(1, 37));
  CHECK(bitwise_equal(tw.host(part_g), part_c));

  Tensor y_c = clone(a), y_g = tw.dev(a);
  tw.cpu->axpy(y_c, b, -0.37);
  tw.gpu->axpy(y_g, bg, -0.37);
  expect_close(tw.host(y_g), y_c, 1, "axpy");
  tw.cpu->scale(y_c, 1.7);
  tw.gpu->scale(y_g, 1.7);
  expect_close(tw.host(y_g), y_c, 2, "scale");
  tw.cpu->add_bias(y_c, bias);
  Tensor bias_g = tw.dev(bias);
  tw.gpu->add_bias(y_g, bias_g);
  expect_close(tw.host(y_g), y_c, 3, "add_bias");

  Tensor db_c = random_tensor({203}, acc_dtype(dt), 4);
  Tensor db_g = tw.dev(db_c);
  tw.cpu->bias_backward(db_c, a);
  tw.gpu->bias_backward(db_g, ag);
  expect_close(tw.host(db_g), db_c, 64, "bias_backward");

  const double ss_c = tw.cpu->sum_squares(a), ss_g = tw.gpu->sum_squares(ag);
  CHECK(ss_g == Approx(ss_c).epsilon(1e-12));
  Tensor empty = tw.gpu->alloc({0}, dt);
  const std::vector<double> many = tw.gpu->sum_squares_many({ag, empty, bg, ag});
  REQUIRE(many.size() == 4);
  CHECK(many[0] == ss_g);  // bit for bit the single call's value
  CHECK(many[1] == 0.0);
  CHECK(many[2] == tw.gpu->sum_squares(bg));
  CHECK(many[3] == ss_g);

  Tensor f = tw.gpu->alloc({5, 7}, dt);
  tw.gpu->fill(f, -2.5);
  for (double v : to_vec(tw.host(f))) CHECK(v == -2.5);
}

TEST_CASE(
    "gemm matches the CPU in every transpose, with bf16/fp16 operands into f32 or their own "
    "dtype") {
  const DType dt = GENERATE(DType::kF32, DType::kF64, DType::kBF16, DType::kF16);
  const bool out_f32 = GENERATE(false, true);
  if (out_f32 && (dt == DType::kF32 || dt == DType::kF64)) return;
  Twin tw;
  const DType ct = out_f32 ? DType::kF32 : dt;
  const int64_t m = 45, n = 77, k = 131;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, dt, 10 + ta);
      const Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, dt, 20 + tb);
      Tensor c_c = random_tensor({m, n}, ct, 30);
      Tensor c_g = tw.dev(c_c);
      tw.cpu->gemm(c_c, a, ta, b, tb, 0.75, 0.5);
      Tensor ag = tw.dev(a), bg = tw.dev(b);
      tw.gpu->gemm(c_g, ag, ta, bg, tb, 0.75, 0.5);
      INFO("trans_a " << ta << " trans_b " << tb << " c " << dtype_name(ct));
      expect_close(tw.host(c_g), c_c, out_f32 ? 512 : slack(dt, 2), "gemm");
    }
  }
}

TEST_CASE("layernorm forward and backward match the CPU") {
  const DType dt = GENERATE(DType::kF32, DType::kF64, DType::kBF16, DType::kF16);
  // 333: the scalar kernels; 336: whole 16-byte packs per row (the packed kernels).
  const int64_t c = GENERATE(333, 336);
  Twin tw;
  const int64_t n = 29;
  const DType at = acc_dtype(dt);
  const Tensor x = random_tensor({n, c}, dt, 1, -2.0, 3.0), w = random_tensor({c}, dt, 2);
  const Tensor bb = random_tensor({c}, dt, 3), dy = random_tensor({n, c}, dt, 4);
  Tensor y_c = Tensor::cpu({n, c}, dt), m_c = Tensor::cpu({n}, at), r_c = Tensor::cpu({n}, at);
  tw.cpu->layernorm_forward(y_c, m_c, r_c, x, w, bb, 1e-5);
  Tensor y_g = tw.gpu->alloc({n, c}, dt), m_g = tw.gpu->alloc({n}, at),
         r_g = tw.gpu->alloc({n}, at);
  Tensor xg = tw.dev(x), wg = tw.dev(w), bg = tw.dev(bb), dyg = tw.dev(dy);
  tw.gpu->layernorm_forward(y_g, m_g, r_g, xg, wg, bg, 1e-5);
  expect_close(tw.host(y_g), y_c, slack(dt, 2), "layernorm out");
  expect_close(tw.host(m_g), m_c, slack(dt, 64), "layernorm mean");
  expect_close(tw.host(r_g), r_c, slack(dt, 64), "layernorm rstd");

  Tensor dx_c = random_tensor({n, c}, dt, 5), dw_c = random_tensor({c}, at, 6),
         db_c = random_tensor({c}, at, 7);
  Tensor dx_g = tw.dev(dx_c), dw_g = tw.dev(dw_c), db_g = tw.dev(db_c);
  tw.cpu->layernorm_backward(dx_c, dw_c, db_c, dy, x, w, m_c, r_c);
  tw.gpu->layernorm_backward(dx_g, dw_g, db_g, dyg, xg, wg, m_g, r_g);
  expect_close(tw.host(dx_g), dx_c, slack(dt, 4), "layernorm din");
  expect_close(tw.host(dw_g), dw_c, slack(dt, 512), "layernorm dweight");
  expect_close(tw.host(db_g), db_c, slack(dt, 512), "layernorm dbias");
}

// The column sums behind every bias and LayerNorm parameter gradient (core/cuda/
// column_sum_cuda.cuh): 16-byte packs where the rows allow, element by element where they do
// not (here: the same values one element off a 16-byte boundary), one plan for both, so the
// same bits; and the CPU's sums within the rounding of a different order (which grows as the
// square root of the rows, as a random walk of roundings does). Shapes with many row
// chunks (more than the finishing pass's eight warps), a column count that is not a multiple
// of 32 (the finishing pass's last block), one row, and wide rows.
TEST_CASE("column sums take packs or elements with the same bits and match the CPU") {
  const DType dt = GENERATE(DType::kF32, DType::kF64, DType::kBF16, DType::kF16);
  const auto [rows, cols] =
      GENERATE(std::pair<int64_t, int64_t>{4099, 40}, std::pair<int64_t, int64_t>{1, 16},
               std::pair<int64_t, int64_t>{37, 6144}, std::pair<int64_t, int64_t>{1000, 8200});
  INFO(dtype_name(dt) << " [" << rows << ", " << cols << "]");
  Twin tw;
  const DType at = acc_dtype(dt);
  const Tensor dy = random_tensor({rows, cols}, dt, 1), x = random_tensor({rows, cols}, dt, 2);
  const Tensor db0 = random_tensor({cols}, at, 3);
  Tensor aligned = tw.dev(dy);
  Tensor flat = tw.gpu->alloc({rows * cols + 1}, dt);
  Tensor shifted = flat.slice(1, rows * cols + 1).view({rows, cols});
  tw.gpu->copy(shifted, dy);

  const double sum_ulps = 64 + 8 * std::sqrt(static_cast<double>(rows));
  Tensor db_packed = tw.dev(db0), db_elems = tw.dev(db0), db_c = clone(db0);
  tw.gpu->bias_backward(db_packed, aligned);
  tw.gpu->bias_backward(db_elems, shifted);
  tw.cpu->bias_backward(db_c, dy);
  CHECK(bitwise_equal(tw.host(db_packed), tw.host(db_elems)));
  expect_close(tw.host(db_packed), db_c, sum_ulps, "bias_backward");

  // LayerNorm's two sums (weight and bias gradients) over the same rows.
  const Tensor w = random_tensor({cols}, dt, 4), bb = random_tensor({cols}, dt, 5);
  Tensor y_c = Tensor::cpu({rows, cols}, dt), m_c = Tensor::cpu({rows}, at),
         r_c = Tensor::cpu({rows}, at);
  tw.cpu->layernorm_forward(y_c, m_c, r_c, x, w, bb, 1e-5);
  Tensor dx_c = Tensor::cpu({rows, cols}, dt), dw_c = clone(db0), dbb_c = clone(db0);
  tw.cpu->layernorm_backward(dx_c, dw_c, dbb_c, dy, x, w, m_c, r_c);
  Tensor xg = tw.dev(x), wg = tw.dev(w), m_g = tw.dev(m_c), r_g = tw.dev(r_c);
  Tensor dx_g = tw.gpu->alloc({rows, cols}, dt), dw_g = tw.dev(db0), dbb_g = tw.dev(db0);
  tw.gpu->layernorm_backward(dx_g, dw_g, dbb_g, aligned, xg, wg, m_g, r_g);
  expect_close(tw.host(dw_g), dw_c, sum_ulps, "layernorm dweight");
  expect_close(tw.host(dbb_g), dbb_c, sum_ulps, "layernorm dbias");
}

TEST_CASE("gelu and dropout match the CPU, dropout's mask bit for bit") {
  const DType dt = GENERATE(DType::kF32, DType::kF64, DType::kBF16, DType::kF16);
  Twin tw;
  const Tensor x = random_tensor({3, 1001}, dt, 1, -4.0, 4.0), dy = random_tensor({3, 1001}, dt, 2);
  Tensor xg = tw.dev(x), dyg = tw.dev(dy);
  for (Activation act : {Activation::kGelu, Activation::kGeluTanh}) {
    Tensor y_c = Tensor::cpu(x.shape(), dt), y_g = tw.gpu->alloc(x.shape(), dt);
    tw.cpu->gelu_forward(y_c, x, act);
    tw.gpu->gelu_forward(y_g, xg, act);
    expect_close(tw.host(y_g), y_c, slack(dt, 1, 8), "gelu forward");
    Tensor dx_c = Tensor::cpu(x.shape(), dt), dx_g = tw.gpu->alloc(x.shape(), dt);
    tw.cpu->gelu_backward(dx_c, dy, x, act);
    tw.gpu->gelu_backward(dx_g, dyg, xg, act);
    expect_close(tw.host(dx_g), dx_c, slack(dt, 1, 8), "gelu backward");
    // Fused with the bias gradient (in place, as the model calls it): the bits of the two calls
    // on the GPU; the bias gradient is the CPU's sum of the same din.
    const DType at = acc_dtype(dt);
    Tensor db_sep = tw.gpu->alloc({1001}, at), db_fused = tw.gpu->alloc({1001}, at);
    tw.gpu->bias_backward(db_sep, dx_g);
    Tensor dfused = tw.dev(dy);
    tw.gpu->gelu_bias_backward(dfused, db_fused, dfused, xg, act);
    const Tensor h_sep = tw.host(dx_g), h_fused = tw.host(dfused);
    const Tensor hb_sep = tw.host(db_sep), hb_fused = tw.host(db_fused);
    CHECK(std::memcmp(h_sep.data(), h_fused.data(), h_sep.nbytes()) == 0);
    CHECK(std::memcmp(hb_sep.data(), hb_fused.data(), hb_sep.nbytes()) == 0);
    Tensor dbc = Tensor::cpu({1001}, at);
    tw.cpu->bias_backward(dbc, h_fused);
    expect_close(hb_fused, dbc, 64, "gelu_bias_backward's bias gradient");
  }
  // The GPU kernel takes one Philox block (four elements) a thread: every offset mod 4, so that
  // the first and last blocks are partial in every way; offsets that are multiples of 4 take
  // the packed kernel (16 bytes a lane, 3003 elements: a tail past the last whole pack).
  for (const uint64_t offset : {0, 1, 2, 4, 8, 99}) {
    INFO("offset " << offset);
    const RngStream rng{1234, 7, offset};
    Tensor d_c = Tensor::cpu(x.shape(), dt), d_g = tw.gpu->alloc(x.shape(), dt);
    tw.cpu->dropout_forward(d_c, x, 0.3, rng);
    tw.gpu->dropout_forward(d_g, xg, 0.3, rng);
    const Tensor d_h = tw.host(d_g);
    int64_t dropped = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const bool zero_c = value_at(d_c, i) == 0.0 && value_at(x, i) != 0.0;
      const bool zero_g = value_at(d_h, i) == 0.0 && value_at(x, i) != 0.0;
      CHECK(zero_c == zero_g);
      dropped += zero_c;
    }
    CHECK(dropped > 600);  // about 30% of 3003
    CHECK(dropped < 1200);
    expect_close(d_h, d_c, 1, "dropout");

    // dropout_add, the residual connection: the fused kernel's bits are dropout_forward's then
    // add's on the GPU (packed at offsets that are multiples of 4, element by element at the
    // others and on rows off a 16-byte boundary), in place over x too; and the CPU's two calls
    // within their roundings. p = 0 is the add alone.
    for (const double p : {0.0, 0.3}) {
      INFO("p " << p);
      Tensor two = tw.gpu->alloc(x.shape(), dt), fused = tw.gpu->alloc(x.shape(), dt);
      tw.gpu->dropout_forward(two, xg, p, rng);
      tw.gpu->add(two, dyg, two);
      tw.gpu->dropout_add(fused, xg, dyg, p, rng);
      CHECK(bitwise_equal(tw.host(fused), tw.host(two)));
      Tensor in_place = tw.dev(x);
      tw.gpu->dropout_add(in_place, in_place, dyg, p, rng);
      CHECK(bitwise_equal(tw.host(in_place), tw.host(two)));
      Tensor y_c = Tensor::cpu(x.shape(), dt);
      tw.cpu->dropout_add(y_c, x, dy, p, rng);
      expect_close(tw.host(fused), y_c, 2, "dropout_add");
      // Rows 1..3 of the [3, 1001] tensors: not on a 16-byte boundary.
      Tensor part = tw.gpu->alloc({2, 1001}, dt), part_two = tw.gpu->alloc({2, 1001}, dt);
      tw.gpu->dropout_add(part, xg.slice(1, 3), dyg.slice(1, 3), p, rng);
      tw.gpu->dropout_forward(part_two, xg.slice(1, 3), p, rng);
      tw.gpu->add(part_two, dyg.slice(1, 3), part_two);
      CHECK(bitwise_equal(tw.host(part), tw.host(part_two)));
    }
  }
  Tensor alias = tw.dev(x);
  CHECK_THROWS_WITH(tw.gpu->dropout_add(alias, xg, alias, 0.1, RngStream{1, 2, 0}),
                    Catch::Contains("dropout_add: y aliases residual"));
}

TEST_CASE("attention forward and backward match the CPU, with and without dropout") {
  const DType dt = GENERATE(DType::kF32, DType::kF64, DType::kBF16, DType::kF16);
  const double p = GENERATE(0.0, 0.15);
  // 67: one causal block, the blocked kernels' loop softmax (s not a multiple of 4); 1100: four
  // blocks, the last ragged (attention_cuda.cu's causal_block), and the softmax rows from
  // registers (core/kernels/softmax_rows.h, 16 chunks).
  const int64_t s = GENERATE(67, 1100);
  // 160: the 530B recipe's, which the FA2-style kernels take when named (as here).
  const int64_t hd = GENERATE(16, 64, 128, 160);
  // cudnn (the default) is checked on its own (its dropout masks are its own); blocked: the
  // cuBLAS ones (fp32/f64 always, and every head size flash2 does not take); flash2: the
  // FA2-style kernels at head
  // sizes 64 and 128 (bf16/fp16), and 160 named; flash2-128:
  // those with the forward's 128-row blocks (MTNLG_CUDA_FLASH2_ROWS=128); flash2-recompute: their
  // backward's dq pass recomputing dS (MTNLG_CUDA_FLASH2_DQ=recompute; stored otherwise here);
  // flash2-fwd and flash2-bwd: the FA2-style kernels in one pass, the blocked ones in the other
  // (each backward from the other family's forward: out and the log-sum-exps).
  const std::string kernel =
      GENERATE("blocked", "flash2", "flash2-128", "flash2-recompute", "flash2-fwd", "flash2-bwd");
  const bool wide = kernel == "flash2-128", recompute = kernel == "flash2-recompute";
  ScopedEnv env("MTNLG_CUDA_ATTENTION", wide || recompute ? "flash2" : kernel);
  ScopedEnv rows("MTNLG_CUDA_FLASH2_ROWS", wide ? "128" : "64");
  ScopedEnv dq("MTNLG_CUDA_FLASH2_DQ", recompute ? "recompute" : "stored");
  Twin tw;
  const int64_t b = 2, heads = 3;
  const RngStream rng{42, 3, 0};
  const Tensor qkv = random_tensor({b, s, heads * 3 * hd}, dt, 1, -2.0, 2.0);
  const Tensor dout = random_tensor({b, s, heads * hd}, dt, 2);
  const DType at = acc_dtype(dt);
  // The CPU's answers depend on the inputs alone, not on the GPU kernels: worked out once for
  // the six kernel sets instead of once per set (float64 attention at s = 1100 on the CPU, for
  // each input, against kernels that take milliseconds on the GPU).
  static std::map<std::string, std::vector<Tensor>> cpu_answers;
  const std::string key = std::string(dtype_name(dt)) + " " + std::to_string(p) + " " +
                          std::to_string(s) + " " + std::to_string(hd);
  if (!cpu_answers.contains(key)) {
    Tensor o = Tensor::cpu({b, s, heads * hd}, dt), l = Tensor::cpu({b, heads, s}, at);
    tw.cpu->attention_forward(o, l, qkv, heads, p, rng);
    Tensor dq = Tensor::cpu(qkv.shape(), dt);
    tw.cpu->attention_backward(dq, dout, qkv, o, l, heads, p, rng);
    cpu_answers[key] = {o, l, dq};
  }
  const Tensor &o_c = cpu_answers[key][0], &l_c = cpu_answers[key][1];
  const Tensor& dq_c = cpu_answers[key][2];
  Tensor qg = tw.dev(qkv), dog = tw.dev(dout);
  Tensor o_g = tw.gpu->alloc(o_c.shape(), dt), l_g = tw.gpu->alloc(l_c.shape(), at);
  tw.gpu->attention_forward(o_g, l_g, qg, heads, p, rng);
  INFO("dropout " << p << ", s " << s << ", hd " << hd << ", " << kernel << " kernels");
  // The log-sum-exps, fp32 under bf16/fp16: scores summed in another order from the same
  // narrow operands, so a few thousand fp32 ulps (2^-11 of the value, far inside one rounding
  // of the scores' operands).
  expect_close(tw.host(l_g), l_c, slack(dt, 4096), "attention stats (log-sum-exp)");
  // Narrow formats: each output sums up to s products with operands rounded on the GPU (the
  // dropped probabilities) but not on the CPU, so the bound scales with the largest output.
  const Scale narrow = dt == DType::kBF16 || dt == DType::kF16 ? Scale::kMax : Scale::kRms;
  expect_close(tw.host(o_g), o_c, slack(dt, 4), "attention out", narrow);

  Tensor dq_g = tw.gpu->alloc(qkv.shape(), dt);
  tw.gpu->attention_backward(dq_g, dog, qg, o_g, l_g, heads, p, rng);
  expect_close(tw.host(dq_g), dq_c, slack(dt, 8, 1024), "attention dqkv", narrow);
}

// A captured step is recorded as micro-batch 0 and replayed for each micro-batch with its streams
// moved by Backend::set_rng_stream_base (model/captured_micro_batch.h): the base word on the
// device moves every kernel's draws (dropout, attention's dropout in each kernel family, cuDNN's
// seed) as a call with the moved stream draws, plainly and in a replayed CUDA graph, and a
// replay with the base back at 0 draws micro-batch 0's masks again.
TEST_CASE("set_rng_stream_base moves the GPU's draws - plainly and in a replayed graph") {
  const DType dt = GENERATE(DType::kF32, DType::kBF16);
  const std::string kernel = GENERATE("blocked", "flash2", "cudnn");
  ScopedEnv env("MTNLG_CUDA_ATTENTION", kernel);
  Twin tw;
  const int64_t b = 2, s = 128, heads = 2, hd = 64;
  const double p = 0.2;
  const uint64_t base = uint64_t{5} << 20;
  const RngStream rng{42, 3, 8}, moved{42, 3 + base, 8};
  const Tensor x = random_tensor({3, 1001}, dt, 1, 0.5, 1.5);
  const Tensor qkv = random_tensor({b, s, heads * 3 * hd}, dt, 2, -2.0, 2.0);
  const Tensor dout = random_tensor({b, s, heads * hd}, dt, 3);
  Tensor xg = tw.dev(x), qg = tw.dev(qkv), dog = tw.dev(dout);
  Tensor d = tw.gpu->alloc(x.shape(), dt), o = tw.gpu->alloc({b, s, heads * hd}, dt);
  Tensor l = tw.gpu->alloc({b, heads, s}, acc_dtype(dt)), dq = tw.gpu->alloc(qkv.shape(), dt);
  const auto calls = [&](RngStream r) {
    tw.gpu->dropout_forward(d, xg, p, r);
    tw.gpu->attention_forward(o, l, qg, heads, p, r);
    tw.gpu->attention_backward(dq, dog, qg, o, l, heads, p, r);
  };
  const auto results = [&] { return std::vector<Tensor>{tw.host(d), tw.host(o), tw.host(dq)}; };
  calls(rng);
  const auto plain = results();
  calls(moved);
  const auto expected = results();
  tw.gpu->set_rng_stream_base(base);
  calls(rng);
  const auto based = results();
  tw.gpu->set_rng_stream_base(0);
  // Recorded with the base at 0, replayed with it set, then at 0 again.
  auto work = tw.gpu->capture([&] { calls(rng); });
  tw.gpu->set_rng_stream_base(base);
  work->replay();
  const auto replayed = results();
  tw.gpu->set_rng_stream_base(0);
  work->replay();
  const auto replayed_plain = results();
  for (size_t k = 0; k < 3; ++k) {
    INFO(kernel << " " << dtype_name(dt) << ", result " << k);
    CHECK(bitwise_equal(based[k], expected[k]));
    CHECK_FALSE(bitwise_equal(based[k], plain[k]));
    CHECK(bitwise_equal(replayed[k], expected[k]));
    CHECK(bitwise_equal(replayed_plain[k], plain[k]));
  }
  // The kernels' masks are the CPU's (cuDNN's are its own): the moved dropout on the CPU.
  Tensor d_c = Tensor::cpu(x.shape(), dt);
  tw.cpu->dropout_forward(d_c, x, p, moved);
  for (int64_t i = 0; i < x.numel(); ++i)
    REQUIRE((value_at(d_c, i) == 0.0) == (value_at(based[0], i) == 0.0));
  tw.gpu->set_rng_stream_base(base);
  CHECK_THROWS_WITH(tw.gpu->capture([&] { tw.gpu->set_rng_stream_base(0); }),
                    Catch::Contains("set_rng_stream_base"));
  tw.gpu->set_rng_stream_base(0);
}

TEST_CASE("linear_bias_forward matches the CPU - fused in cuBLASLt's epilogue or not") {
  const DType dt = GENERATE(DType::kF32, DType::kBF16, DType::kF16);
  const Activation act = GENERATE(Activation::kGeluTanh, Activation::kGelu);
  const bool with_gelu = GENERATE(false, true);
  // out 200 and in 64: multiples of 8, so bf16/fp16 take the epilogue (with the tanh GeLU or
  // none); out 203: they do not. "off": never.
  const int64_t out = GENERATE(200, 203);
  const std::string epilogues = GENERATE("on", "off");
  ScopedEnv env("MTNLG_CUDA_EPILOGUES", epilogues);
  Twin tw;
  INFO(dtype_name(dt) << (with_gelu ? " with GeLU" : "") << " out " << out << " epilogues "
                      << epilogues);
  const Tensor x = random_tensor({3, 37, 64}, dt, 1), w = random_tensor({out, 64}, dt, 2);
  const Tensor bias = random_tensor({out}, dt, 3);
  Tensor y_c = Tensor::cpu({3, 37, out}, dt), g_c = Tensor::cpu({3, 37, out}, dt);
  tw.cpu->linear_bias_forward(y_c, x, w, bias, with_gelu ? &g_c : nullptr, act);
  Tensor y_g = tw.gpu->alloc(y_c.shape(), dt), g_g = tw.gpu->alloc(g_c.shape(), dt);
  tw.gpu->linear_bias_forward(y_g, tw.dev(x), tw.dev(w), tw.dev(bias), with_gelu ? &g_g : nullptr,
                              act);
  // The epilogue rounds x w^T + bias once, the separate kernels twice; GeLU from the unrounded
  // sum there, from the rounded y here.
  expect_close(tw.host(y_g), y_c, slack(dt, 3), "linear + bias");
  if (with_gelu) expect_close(tw.host(g_g), g_c, slack(dt, 4), "its GeLU");
}

TEST_CASE("MTNLG_CUDA_EPILOGUES other than on or off is an error naming it") {
  ScopedEnv env("MTNLG_CUDA_EPILOGUES", "yes");
  CHECK_THROWS_WITH(make_cuda_backend(0),
                    Catch::Contains("MTNLG_CUDA_EPILOGUES=yes") && Catch::Contains("on, off"));
}

// The planner predicts live_bytes' peak to the byte from the model alone (cmd/planner.cc), so
// the backend's own scratch must not count as tensors: it is planned as kernel scratch.
TEST_CASE("a new CUDA backend holds no tensors - its own scratch is outside the count") {
  auto be = make_cuda_backend(0);
  CHECK(be->live_bytes() == 0);
  CHECK(be->peak_bytes() == 0);
  CHECK(be->reserved_bytes() >= kCudaBackendScratchBytes);
  Tensor x = be->alloc({3}, DType::kF32);
  be->fill(x, 2.0);
  CHECK(be->sum_squares(x) == 12.0);
  CHECK(be->peak_bytes() == 12);
}

TEST_CASE("MTNLG_CUDA_FLASH2_DQ other than auto or stored or recompute is an error naming it") {
  ScopedEnv env("MTNLG_CUDA_FLASH2_DQ", "stores");
  CHECK_THROWS_WITH(make_cuda_backend(0), Catch::Contains("MTNLG_CUDA_FLASH2_DQ=stores") &&
                                              Catch::Contains("auto, stored, recompute"));
}

TEST_CASE("MTNLG_CUDA_FLASH2_ROWS other than 64 or 128 is an error naming it") {
  ScopedEnv env("MTNLG_CUDA_FLASH2_ROWS", "96");
  CHECK_THROWS_WITH(make_cuda_backend(0),
                    Catch::Contains("MTNLG_CUDA_FLASH2_ROWS=96") && Catch::Contains("64, 128"));
}

TEST_CASE("MTNLG_CUDA_ATTENTION other than flash2 or blocked or flash is an error naming it") {
  ScopedEnv env("MTNLG_CUDA_ATTENTION", "fast");
  CHECK_THROWS_WITH(make_cuda_backend(0), Catch::Contains("MTNLG_CUDA_ATTENTION=fast") &&
                                              Catch::Contains("flash2, blocked, flash"));
}

TEST_CASE("embedding forward and backward match the CPU, fp32 gradients bit for bit") {
  const DType dt = GENERATE(DType::kF32, DType::kF64, DType::kBF16, DType::kF16);
  Twin tw;
  const int64_t v = 53, b = 3, s = 41, c = 70, positions = 64;
  const DType at = acc_dtype(dt);
  const Tensor tokens = random_ids({b, s}, v, 5);
  const Tensor wte = random_tensor({v, c}, dt, 1), wpe = random_tensor({positions, c}, dt, 2);
  const Tensor dout = random_tensor({b, s, c}, dt, 3);
  Tensor y_c = Tensor::cpu({b, s, c}, dt), y_g = tw.gpu->alloc({b, s, c}, dt);
  tw.cpu->embedding_forward(y_c, tokens, wte, wpe);
  Tensor tg = tw.dev(tokens), wteg = tw.dev(wte), wpeg = tw.dev(wpe), dog = tw.dev(dout);
  tw.gpu->embedding_forward(y_g, tg, wteg, wpeg);
  CHECK(bitwise_equal(tw.host(y_g), y_c));

  Tensor dwte_c = random_tensor({v, c}, at, 6), dwpe_c = random_tensor({positions, c}, at, 7);
  Tensor dwte_g = tw.dev(dwte_c), dwpe_g = tw.dev(dwpe_c);
  tw.cpu->embedding_backward(dwte_c, dwpe_c, dout, tokens);
  tw.gpu->embedding_backward(dwte_g, dwpe_g, dog, tg);
  CHECK(bitwise_equal(tw.host(dwte_g), dwte_c));
  CHECK(bitwise_equal(tw.host(dwpe_g), dwpe_c));
}

TEST_CASE("cross entropy forward and backward match the CPU, also in place") {
  const DType dt = GENERATE(DType::kF32, DType::kF64, DType::kBF16, DType::kF16);
  Twin tw;
  const int64_t n = 13, vp = 1031, vocab = 1000;
  const Tensor logits = random_tensor({n, vp}, dt, 1, -6.0, 6.0);
  const Tensor targets = random_ids({n}, vocab, 2);
  Tensor lg = tw.dev(logits), tg = tw.dev(targets);
  const double l_c = tw.cpu->cross_entropy_forward(logits, targets, vocab);
  const double l_g = tw.gpu->cross_entropy_forward(lg, tg, vocab);
  CHECK(l_g == Approx(l_c).epsilon(dt == DType::kF64 ? 1e-13 : 1e-6));
  Tensor d_c = Tensor::cpu(logits.shape(), dt);
  tw.cpu->cross_entropy_backward(d_c, logits, targets, vocab, 0.25);
  tw.gpu->cross_entropy_backward(lg, lg, tg, vocab, 0.25);  // in place, as the model does
  expect_close(tw.host(lg), d_c, slack(dt, 2, 64), "cross entropy dlogits");
}

// The trainer's loss (model/loss_sum.h): summed on the device, the bits of the returned losses
// added on the host.
TEST_CASE("cross_entropy_forward_add on the GPU adds its returned loss bit for bit") {
  const DType dt = GENERATE(DType::kF32, DType::kBF16);
  Twin tw;
  const int64_t n = 13, vp = 1031, vocab = 1000;
  Tensor total = tw.gpu->alloc({1}, DType::kF64);
  double want = 0.0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    Tensor lg = tw.dev(random_tensor({n, vp}, dt, seed, -6.0, 6.0));
    Tensor tg = tw.dev(random_ids({n}, vocab, seed + 10));
    tw.gpu->cross_entropy_forward_add(total, lg, tg, vocab);
    want += tw.gpu->cross_entropy_forward(lg, tg, vocab);
  }
  CHECK(tw.host(total).data_as<double>()[0] == want);
  CHECK(want > 0.0);
}

TEST_CASE("vocab-parallel embedding and cross-entropy steps match the CPU on every shard") {
  // A padded vocabulary of 1032 = 3 shards of 344 over a real vocabulary of 1000 (the last shard
  // partly padding); each shard's steps on the GPU against the CPU's.
  const DType dt = GENERATE(DType::kF32, DType::kF64, DType::kBF16, DType::kF16);
  Twin tw;
  const int64_t b = 3, s = 41, c = 70, n = b * s, shard = 344, vocab = 1000;
  const DType at = acc_dtype(dt);
  const Tensor tokens = random_ids({b, s}, vocab, 5), targets = random_ids({n}, vocab, 6);
  const Tensor wpe = random_tensor({s, c}, dt, 2), dout = random_tensor({b, s, c}, dt, 3);
  Tensor tg = tw.dev(tokens), ttg = tw.dev(targets), wpeg = tw.dev(wpe), dog = tw.dev(dout);
  for (int64_t start = 0; start < 3 * shard; start += shard) {
    INFO("shard at " << start);
    const bool first = start == 0;
    const Tensor wte = random_tensor({shard, c}, dt, 10 + static_cast<uint64_t>(start));
    Tensor wteg = tw.dev(wte);
    Tensor y_c = Tensor::cpu({b, s, c}, dt), y_g = tw.gpu->alloc({b, s, c}, dt);
    tw.cpu->embedding_shard_forward(y_c, tokens, wte, first ? wpe : Tensor(), start);
    tw.gpu->embedding_shard_forward(y_g, tg, wteg, first ? wpeg : Tensor(), start);
    CHECK(bitwise_equal(tw.host(y_g), y_c));
    Tensor dwte_c = random_tensor({shard, c}, at, 6), dwpe_c = random_tensor({s, c}, at, 7);
    Tensor dwte_g = tw.dev(dwte_c), dwpe_g = tw.dev(dwpe_c), none;
    tw.cpu->embedding_shard_backward(dwte_c, first ? dwpe_c : none, dout, tokens, start);
    tw.gpu->embedding_shard_backward(dwte_g, first ? dwpe_g : none, dog, tg, start);
    CHECK(bitwise_equal(tw.host(dwte_g), dwte_c));
    CHECK(bitwise_equal(tw.host(dwpe_g), dwpe_c));

    const Tensor logits = random_tensor({n, shard}, dt, 20 + static_cast<uint64_t>(start), -6, 6);
    Tensor lg = tw.dev(logits);
    Tensor mx_c = Tensor::cpu({n}, DType::kF64), mx_g = tw.gpu->alloc({n}, DType::kF64);
    tw.cpu->cross_entropy_shard_max(mx_c, logits, start, vocab);
    tw.gpu->cross_entropy_shard_max(mx_g, lg, start, vocab);
    CHECK(bitwise_equal(tw.host(mx_g), mx_c));  // a max is exact
    Tensor st_c = Tensor::cpu({2, n}, DType::kF64), st_g = tw.gpu->alloc({2, n}, DType::kF64);
    tw.cpu->cross_entropy_shard_stats(st_c, logits, targets, mx_c, start, vocab);
    tw.gpu->cross_entropy_shard_stats(st_g, lg, ttg, mx_g, start, vocab);
    expect_close(tw.host(st_g), st_c, 64, "shard stats");
    const Tensor sum_c = st_c.view({2 * n}).slice(0, n), sum_g = st_g.view({2 * n}).slice(0, n);
    Tensor d_c = Tensor::cpu(logits.shape(), dt);
    tw.cpu->cross_entropy_shard_backward(d_c, logits, targets, mx_c, sum_c, start, vocab, 0.25);
    tw.gpu->cross_entropy_shard_backward(lg, lg, ttg, mx_g, sum_g, start, vocab, 0.25);  // aliased
    expect_close(tw.host(lg), d_c, slack(dt, 1, 64), "shard dlogits");
  }
}

// core/cuda/pinned_staging.h: the host's buffer may change at once; the ring's slots are reused
// (more copies than slots) and grow; a copy above kMaxBytes takes the waiting path.
TEST_CASE("small uploads wait for nothing and arrive intact - past the ring's slots - any size") {
  Twin tw;
  const std::vector<int64_t> sizes = {1000, 200000, 7, 300000, 16384};
  std::vector<Tensor> dev;
  std::vector<int32_t> first;
  for (int k = 0; k < 3 * PinnedStaging::kSlots; ++k) {
    const int64_t n = sizes[static_cast<size_t>(k) % sizes.size()];
    Tensor host = Tensor::cpu({n}, DType::kI32);
    for (int64_t i = 0; i < n; ++i) host.data_as<int32_t>()[i] = static_cast<int32_t>(k * 7 + i);
    dev.push_back(tw.gpu->alloc({n}, DType::kI32));
    tw.gpu->copy(dev.back(), host);
    std::fill_n(host.data_as<int32_t>(), n, -1);  // the caller's memory, reused on return
  }
  for (int k = 0; k < 3 * PinnedStaging::kSlots; ++k) {
    const Tensor back = tw.host(dev[static_cast<size_t>(k)]);
    int64_t wrong = 0;
    for (int64_t i = 0; i < back.numel(); ++i)
      wrong += back.data_as<int32_t>()[i] != static_cast<int32_t>(k * 7 + i);
    INFO("copy " << k << " of " << back.numel() << " ids");
    CHECK(wrong == 0);
  }
}

// The checks wait for nothing (core/id_checks.h): a bad id is raised at the backend's next
// synchronization with the host, once, naming the operation that queued the check.
TEST_CASE(
    "a bad token or target id on the GPU is an invalid_argument at the next synchronization naming "
    "its op and position") {
  Twin tw;
  Tensor tokens = random_ids({2, 5}, 10, 1);
  tokens.data_as<int32_t>()[7] = 10;
  tokens.data_as<int32_t>()[9] = -4;
  Tensor tg = tw.dev(tokens);
  Tensor wte = tw.gpu->alloc({10, 4}, DType::kF32), wpe = tw.gpu->alloc({5, 4}, DType::kF32);
  Tensor out = tw.gpu->alloc({2, 5, 4}, DType::kF32);
  tw.gpu->embedding_forward(out, tg, wte, wpe);  // queued; the bad rows read no table row
  try {
    tw.gpu->synchronize();
    FAIL("no error for token id 10 with a vocabulary of 10");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("embedding_forward: token id 10 at position 7") &&
                             Catch::Contains("model.vocab_size"));
  }
  CHECK_NOTHROW(tw.gpu->synchronize());  // raised once

  // A copy to the host is a synchronization too.
  Tensor dwte = tw.gpu->alloc({10, 4}, DType::kF32), dwpe = tw.gpu->alloc({5, 4}, DType::kF32);
  tw.gpu->embedding_backward(dwte, dwpe, out, tg);
  CHECK_THROWS_WITH(tw.host(dwte),
                    Catch::Contains("embedding_backward: token id 10 at position 7"));

  // The cross entropy reads its loss back: raised by the operation itself, the bad row's loss
  // never read from outside its row.
  Tensor logits = tw.gpu->alloc({10, 12}, DType::kF32);
  Tensor targets = tw.dev(tokens.view({10}));
  CHECK_THROWS_WITH(tw.gpu->cross_entropy_forward(logits, targets, 10),
                    Catch::Contains("cross_entropy_forward: target id 10 at position 7"));

  // More checks than the backend has words: the one past them waits for the earlier ones.
  Tensor good = tw.dev(random_ids({2, 5}, 10, 2));
  tw.gpu->embedding_forward(out, tg, wte, wpe);
  CHECK_THROWS_WITH(
      [&] {
        for (int i = 0; i < DeferredIdChecks::kSlots; ++i)
          tw.gpu->embedding_forward(out, good, wte, wpe);
      }(),
      Catch::Contains("token id 10 at position 7"));
  for (int i = 0; i < 3 * DeferredIdChecks::kSlots; ++i)
    tw.gpu->embedding_forward(out, good, wte, wpe);
  CHECK_NOTHROW(tw.gpu->synchronize());
}

// core/kernels/adamw_math.h leaves the compilers no contraction to choose (every multiply-add an
// explicit fma; tests/core/adamw_exact_test.cc holds the CPU to it), and division and square root
// round correctly on both: the GPU's step is the CPU's bit for bit.
TEST_CASE("AdamW on the GPU is the CPU's step bit for bit - f32 and f64") {
  const DType dt = GENERATE(DType::kF32, DType::kF64);
  Twin tw;
  Tensor p_c = random_tensor({1003}, dt, 1), g = random_tensor({1003}, dt, 2);
  Tensor m_c = random_tensor({1003}, dt, 3, -0.1, 0.1);
  Tensor v_c = random_tensor({1003}, dt, 4, 0.0, 0.1);
  Tensor p_g = tw.dev(p_c), g_g = tw.dev(g), m_g = tw.dev(m_c), v_g = tw.dev(v_c);
  AdamWArgs args;
  args.lr = 1e-3;
  args.weight_decay = 0.1;
  args.step = 3;
  args.grad_scale = 0.5;
  tw.cpu->adamw_update(p_c, g, m_c, v_c, args);
  tw.gpu->adamw_update(p_g, g_g, m_g, v_g, args);
  CHECK(bitwise_equal(tw.host(p_g), p_c));
  CHECK(bitwise_equal(tw.host(m_g), m_c));
  CHECK(bitwise_equal(tw.host(v_g), v_c));
  Tensor bf = tw.gpu->alloc({4}, DType::kBF16);
  CHECK_THROWS(tw.gpu->adamw_update(bf, bf, bf, bf, args));
}

TEST_CASE("adamw_update_many steps every tensor as one call each would - batches of 32") {
  Twin tw;
  // 70 tensors (three launches of fp32 masters with bf16 weights, plus f32 ones): ragged sizes,
  // one empty, every third without weight decay.
  struct Slot {
    Tensor p, master, g, m, v;
  };
  std::vector<Slot> one, many;
  std::vector<AdamWItem> items, items_one;
  const int count = 70;
  for (int t = 0; t < count; ++t) {
    const int64_t n = t == 5 ? 0 : 1 + (t * 977) % 5003;
    const bool rounded = t % 7 != 0;
    const uint64_t seed = 100 + 10 * static_cast<uint64_t>(t);
    for (auto* slots : {&one, &many}) {
      Slot s;
      s.master = tw.dev(random_tensor({n}, DType::kF32, seed));
      s.g = tw.dev(random_tensor({n}, DType::kF32, seed + 1));
      s.m = tw.dev(random_tensor({n}, DType::kF32, seed + 2, -0.1, 0.1));
      s.v = tw.dev(random_tensor({n}, DType::kF32, seed + 3, 0.0, 0.1));
      s.p = rounded ? tw.gpu->alloc({n}, DType::kBF16) : s.master;
      slots->push_back(s);
    }
  }
  for (int t = 0; t < count; ++t) {
    AdamWArgs args;
    args.lr = 1e-3;
    args.weight_decay = t % 3 == 0 ? 0.0 : 0.1;
    args.step = 7;
    args.grad_scale = 0.5;
    const bool rounded = t % 7 != 0;
    for (auto [slots, list] : {std::pair{&one, &items_one}, std::pair{&many, &items}}) {
      Slot& s = (*slots)[static_cast<size_t>(t)];
      list->push_back(AdamWItem{&s.p, rounded ? &s.master : nullptr, &s.g, &s.m, &s.v, args});
    }
  }
  for (const AdamWItem& it : items_one) {  // one call per tensor, the reference
    if (it.master != nullptr)
      tw.gpu->adamw_update_rounded(*it.param, *it.master, *it.grad, *it.m, *it.v, it.args);
    else
      tw.gpu->adamw_update(*it.param, *it.grad, *it.m, *it.v, it.args);
  }
  tw.gpu->adamw_update_many(items);
  for (int t = 0; t < count; ++t) {
    INFO("tensor " << t);
    const Slot &a = one[static_cast<size_t>(t)], &b = many[static_cast<size_t>(t)];
    CHECK(bitwise_equal(tw.host(a.master), tw.host(b.master)));
    CHECK(bitwise_equal(tw.host(a.p), tw.host(b.p)));
    CHECK(bitwise_equal(tw.host(a.m), tw.host(b.m)));
    CHECK(bitwise_equal(tw.host(a.v), tw.host(b.v)));
  }
  // A bf16 weight without a master is refused by name, before anything runs.
  Tensor bf = tw.gpu->alloc({4}, DType::kBF16);
  CHECK_THROWS_WITH(tw.gpu->adamw_update_many({AdamWItem{&bf, nullptr, &bf, &bf, &bf, {}}}),
                    Catch::Contains("adamw_update_many"));
}

// A captured optimizer step's operations (optim/captured_adamw_step.h): the sums equal
// sum_squares_many's, the clip words the host's arithmetic on them, the step from the words the
// step with the same values as arguments, a skip word leaves everything alone; and all three
// recorded once and replayed with new words give what plain calls with those words give.
TEST_CASE("the step words on the GPU equal the host's values - plainly and in a replayed graph") {
  Twin tw;
  const int count = 40;  // two launches of the batched step
  std::vector<Tensor> grads, masters, weights, ms, vs;
  for (int t = 0; t < count; ++t) {
    const int64_t n = t == 3 ? 0 : 1 + (t * 7919) % 40001;
    const uint64_t seed = 500 + 10 * static_cast<uint64_t>(t);
    grads.push_back(tw.dev(random_tensor({n}, DType::kF32, seed)));
    masters.push_back(tw.dev(random_tensor({n}, DType::kF32, seed + 1)));
    ms.push_back(tw.dev(random_tensor({n}, DType::kF32, seed + 2, -0.1, 0.1)));
    vs.push_back(tw.dev(random_tensor({n}, DType::kF32, seed + 3, 0.0, 0.1)));
    weights.push_back(tw.gpu->alloc({n}, DType::kBF16));
  }
  Tensor sums = tw.gpu->alloc({count}, DType::kF64);
  tw.gpu->sum_squares_into(sums, grads);
  const std::vector<double> want = tw.gpu->sum_squares_many(grads);
  const Tensor got = tw.host(sums);
  for (int t = 0; t < count; ++t) CHECK(got.data_as<double>()[t] == want[static_cast<size_t>(t)]);

  const auto items_of = [&](std::vector<Tensor>& w, std::vector<Tensor>& mw, std::vector<Tensor>& m,
                            std::vector<Tensor>& v) {
    std::vector<AdamWItem> items;
    for (int t = 0; t < count; ++t) {
      AdamWArgs a;
      a.weight_decay = t % 3 ? 0.1 : 0.0;
      a.step = 1;  // not read: the words say
      items.push_back(AdamWItem{&w[static_cast<size_t>(t)], &mw[static_cast<size_t>(t)],
                                &grads[static_cast<size_t>(t)], &m[static_cast<size_t>(t)],
                                &v[static_cast<size_t>(t)], a});
    }
    return items;
  };
  const auto clone = [&](const std::vector<Tensor>& xs) {
    std::vector<Tensor> out;
    for (const Tensor& x : xs) {
      out.push_back(tw.gpu->alloc(x.shape(), x.dtype()));
      tw.gpu->copy(out.back(), x);
    }
    return out;
  };
  // Three copies of the state: stepped by arguments (the reference), by words plainly, by words
  // in a replayed graph.
  std::vector<Tensor> w1 = clone(weights), mw1 = clone(masters), m1 = clone(ms), v1 = clone(vs);
  std::vector<Tensor> w2 = clone(weights), mw2 = clone(masters), m2 = clone(ms), v2 = clone(vs);
  std::vector<Tensor> w3 = clone(weights), mw3 = clone(masters), m3 = clone(ms), v3 = clone(vs);
  const auto ref = items_of(w1, mw1, m1, v1), plain = items_of(w2, mw2, m2, v2),
             graphed = items_of(w3, mw3, m3, v3);
  Tensor words2 = tw.gpu->alloc({AdamWStepWords::kCount}, DType::kF64);
  Tensor words3 = tw.gpu->alloc({AdamWStepWords::kCount}, DType::kF64);
  Tensor loss = tw.dev(Tensor::cpu({1}, DType::kF64));
  const auto upload = [&](Tensor& words, double lr, int64_t step, double loss_scale, double l) {
    Tensor h = Tensor::cpu({4}, DType::kF64);
    h.data_as<double>()[AdamWStepWords::kLr] = lr;
    h.data_as<double>()[AdamWStepWords::kBiasCorrection1] =
        kernels::adamw_bias_correction(0.9, step);
    h.data_as<double>()[AdamWStepWords::kBiasCorrection2] =
        kernels::adamw_bias_correction(0.999, step);
    h.data_as<double>()[AdamWStepWords::kLossScale] = loss_scale;
    Tensor head = words.slice(0, 4);
    tw.gpu->copy(head, h);
    Tensor lh = Tensor::cpu({1}, DType::kF64);
    lh.data_as<double>()[0] = l;
    tw.gpu->copy(loss, lh);
  };
  const double max_norm = 20.0;
  const auto step_calls = [&](Tensor& words, const std::vector<AdamWItem>& items) {
    tw.gpu->sum_squares_into(sums, grads);
    tw.gpu->grad_clip_words(words, sums, 9, loss, max_norm);
    tw.gpu->adamw_update_many_from(items, words);
  };
  std::unique_ptr<CapturedWork> work;
  const double inf = std::numeric_limits<double>::infinity();
  for (int k = 0; k < 4; ++k) {
    const double lr = 1e-3 * (k + 1), loss_scale = k < 2 ? 1.0 : 64.0;
    const double l = k == 2 ? inf : 3.0;     // step 3 (k 2): a non-finite loss, skipped
    const int64_t step = k < 2 ? k + 1 : k;  // the skipped step does not count
    upload(words2, lr, step, loss_scale, l);
    step_calls(words2, plain);
    const Tensor w2h = tw.host(words2);
    const double* wv = w2h.data_as<double>();
    // The host's arithmetic on the same sums gives the same words.
    std::vector<double> host_words(AdamWStepWords::kCount, 0.0);
    std::copy(wv, wv + 4, host_words.begin());
    kernels::grad_clip_words(host_words.data(), want.data(), count, 9, l, max_norm);
    for (int i = 0; i < AdamWStepWords::kCount; ++i) CHECK(host_words[i] == wv[i]);
    CHECK(wv[AdamWStepWords::kSkip] == (k == 2 ? 1.0 : 0.0));
    if (k == 0) CHECK(wv[AdamWStepWords::kGradScale] < 1.0);  // the clip acts at these sizes
    if (k != 2) {
      std::vector<AdamWItem> args = ref;
      for (AdamWItem& it : args) {
        it.args.lr = lr;
        it.args.step = step;
        it.args.grad_scale = wv[AdamWStepWords::kGradScale];
      }
      tw.gpu->adamw_update_many(args);
    }
    upload(words3, lr, step, loss_scale, l);
    if (!work) work = tw.gpu->capture([&] { step_calls(words3, graphed); });
    work->replay();
    CHECK(bitwise_equal(tw.host(words3), w2h));
    for (int t = 0; t < count; ++t) {
      INFO("step " << k << ", tensor " << t);
      const size_t i = static_cast<size_t>(t);
      const Tensor want_master = tw.host(mw1[i]), want_weight = tw.host(w1[i]);
      CHECK(bitwise_equal(tw.host(mw2[i]), want_master));
      CHECK(bitwise_equal(tw.host(w2[i]), want_weight));
      CHECK(bitwise_equal(tw.host(m2[i]), tw.host(m1[i])));
      CHECK(bitwise_equal(tw.host(mw3[i]), want_master));
      CHECK(bitwise_equal(tw.host(w3[i]), want_weight));
      CHECK(bitwise_equal(tw.host(v3[i]), tw.host(v1[i])));
    }
  }
  CHECK(work->launches() > 2 * count);  // the sums' passes, the clip, the batched step
}

// A captured step reads its ids' checks after its update (the host's step before it): a bad id
// whose check is still pending skips the update on the device, then is raised at the read.
TEST_CASE("a bad id pending at a step's clip skips its update - raised at the words' read") {
  Twin tw;
  Tensor tokens = random_ids({2, 5}, 10, 1);
  tokens.data_as<int32_t>()[3] = 12;
  Tensor tg = tw.dev(tokens);
  Tensor wte = tw.gpu->alloc({10, 4}, DType::kF32), wpe = tw.gpu->alloc({5, 4}, DType::kF32);
  Tensor out = tw.gpu->alloc({2, 5, 4}, DType::kF32);
  const Tensor w0 = random_tensor({64}, DType::kF32, 2);
  Tensor w = tw.dev(w0), g = tw.dev(random_tensor({64}, DType::kF32, 3));
  Tensor m = tw.gpu->alloc({64}, DType::kF32), v = tw.gpu->alloc({64}, DType::kF32);
  Tensor sums = tw.gpu->alloc({1}, DType::kF64), loss = tw.gpu->alloc({1}, DType::kF64);
  Tensor words = tw.gpu->alloc({AdamWStepWords::kCount}, DType::kF64);
  Tensor head = Tensor::cpu({4}, DType::kF64);
  const double up[4] = {1e-2, kernels::adamw_bias_correction(0.9, 1),
                        kernels::adamw_bias_correction(0.999, 1), 1.0};
  std::copy(up, up + 4, head.data_as<double>());
  Tensor words_head = words.slice(0, 4);
  tw.gpu->copy(words_head, head);
  std::vector<AdamWItem> items{AdamWItem{&w, nullptr, &g, &m, &v, AdamWArgs{}}};
  tw.gpu->embedding_forward(out, tg, wte, wpe);  // its check pending: not read yet
  tw.gpu->sum_squares_into(sums, {g});
  tw.gpu->grad_clip_words(words, sums, 0, loss, 1.0);
  tw.gpu->adamw_update_many_from(items, words);
  CHECK_THROWS_WITH(tw.host(words),
                    Catch::Contains("embedding_forward: token id 12 at position 3"));
  const Tensor after = tw.host(words);  // raised once; the words say why nothing ran
  CHECK(after.data_as<double>()[AdamWStepWords::kSkip] == 1.0);
  CHECK(bitwise_equal(tw.host(w), w0));
  // Without a bad id the same calls update.
  tw.gpu->grad_clip_words(words, sums, 0, loss, 1.0);
  tw.gpu->adamw_update_many_from(items, words);
  CHECK(tw.host(words).data_as<double>()[AdamWStepWords::kSkip] == 0.0);
  CHECK_FALSE(bitwise_equal(tw.host(w), w0));
}

// A CUDA graph holds the backend's workspace by address: the workspace growing after a
// recording makes it stale (its replay refused, not run through the freed block), and growing
// inside a recording is refused (a replay would reach a block released mid-graph).
TEST_CASE("a graph holding the workspace goes stale when it grows - growth inside one refused") {
  Twin tw;
  const Tensor x = tw.dev(random_tensor({300000}, DType::kF32, 1));
  const std::vector<Tensor> one{x};
  Tensor sum1 = tw.gpu->alloc({1}, DType::kF64);
  tw.gpu->sum_squares_into(sum1, one);  // the workspace exists (1 MiB) before the recording
  auto work = tw.gpu->capture([&] { tw.gpu->sum_squares_into(sum1, one); });
  work->replay();
  CHECK_FALSE(work->stale());
  // 300 tensors' first-pass partials (1,023 doubles each) need more than 2 MiB.
  const std::vector<Tensor> many(300, x);
  Tensor sums = tw.gpu->alloc({300}, DType::kF64);
  CHECK_THROWS_WITH(tw.gpu->capture([&] { tw.gpu->sum_squares_into(sums, many); }),
                    Catch::Contains("inside a captured step"));
  CHECK_FALSE(work->stale());  // the refused growth moved nothing
  tw.gpu->sum_squares_into(sums, many);
  CHECK(work->stale());
  CHECK_THROWS_WITH(work->replay(), Catch::Contains("record it again"));
  const std::vector<double> want = tw.gpu->sum_squares_many(one);
  auto again = tw.gpu->capture([&] { tw.gpu->sum_squares_into(sum1, one); });
  again->replay();
  CHECK(tw.host(sum1).data_as<double>()[0] == want[0]);
}

TEST_CASE("the fused AdamW step with rounding matches AdamW then copy") {
  const DType nt = GENERATE(DType::kBF16, DType::kF16);
  Twin tw;
  const int64_t n = 1003;
  Tensor w_c = random_tensor({n}, DType::kF32, 1), g = random_tensor({n}, DType::kF32, 2);
  Tensor m_c = random_tensor({n}, DType::kF32, 3, -0.1, 0.1);
  Tensor v_c = random_tensor({n}, DType::kF32, 4, 0.0, 0.1);
  Tensor w_g = tw.dev(w_c), g_g = tw.dev(g), m_g = tw.dev(m_c), v_g = tw.dev(v_c);
  Tensor w2 = tw.dev(w_c), m2 = tw.dev(m_c), v2 = tw.dev(v_c);
  Tensor p_c = Tensor::cpu({n}, nt), p_g = tw.gpu->alloc({n}, nt), p2 = tw.gpu->alloc({n}, nt);
  AdamWArgs args;
  args.lr = 1e-2;
  args.weight_decay = 0.1;
  args.step = 2;
  tw.cpu->adamw_update_rounded(p_c, w_c, g, m_c, v_c, args);  // the default: update, then copy
  tw.gpu->adamw_update_rounded(p_g, w_g, g_g, m_g, v_g, args);
  tw.gpu->adamw_update(w2, g_g, m2, v2, args);  // the unfused GPU steps
  tw.gpu->copy(p2, w2);
  const Tensor master = tw.host(w_g);
  CHECK(bitwise_equal(master, w_c));          // fused, GPU vs CPU
  CHECK(bitwise_equal(master, tw.host(w2)));  // fused vs unfused
  CHECK(bitwise_equal(tw.host(m_g), m_c));
  CHECK(bitwise_equal(tw.host(v_g), v_c));
  Tensor rounded = Tensor::cpu({n}, nt);
  tw.cpu->copy(rounded, master);
  CHECK(bitwise_equal(tw.host(p_g), rounded));  // the weight is exactly the master rounded
}

TEST_CASE("CUDA backward kernels are bit-reproducible run to run") {
  // The blocked attention kernels (head size 32; cuDNN's, the default, have their own test).
  ScopedEnv env("MTNLG_CUDA_ATTENTION", "blocked");
  Twin tw;
  const DType dt = DType::kBF16;
  const Tensor qkv = random_tensor({2, 130, 4 * 3 * 32}, dt, 1);
  const Tensor dout = random_tensor({2, 130, 4 * 32}, dt, 2);
  Tensor qg = tw.dev(qkv), dog = tw.dev(dout);
  Tensor o = tw.gpu->alloc(dout.shape(), dt), st = tw.gpu->alloc({2, 4, 130}, DType::kF32);
  tw.gpu->attention_forward(o, st, qg, 4, 0.1, RngStream{1, 2, 3});
  std::vector<Tensor> runs;
  for (int r = 0; r < 2; ++r) {
    Tensor dq = tw.gpu->alloc(qkv.shape(), dt);
    tw.gpu->attention_backward(dq, dog, qg, o, st, 4, 0.1, RngStream{1, 2, 3});
    Tensor dw = tw.gpu->alloc({4 * 32}, DType::kF32), db = tw.gpu->alloc({4 * 32}, DType::kF32);
    Tensor mean = tw.gpu->alloc({260}, DType::kF32), rstd = tw.gpu->alloc({260}, DType::kF32);
    Tensor w = tw.dev(random_tensor({4 * 32}, dt, 5)), bb = tw.dev(random_tensor({4 * 32}, dt, 6));
    Tensor y = tw.gpu->alloc(dout.shape(), dt), dx = tw.gpu->alloc(dout.shape(), dt);
    tw.gpu->layernorm_forward(y, mean, rstd, dog, w, bb, 1e-5);
    tw.gpu->layernorm_backward(dx, dw, db, o, dog, w, mean, rstd);
    runs.push_back(tw.host(dq));
    runs.push_back(tw.host(dw));
    runs.push_back(tw.host(dx));
  }
  CHECK(bitwise_equal(runs[0], runs[3]));
  CHECK(bitwise_equal(runs[1], runs[4]));
  CHECK(bitwise_equal(runs[2], runs[5]));
}

TEST_CASE("FA2-style attention is bit-reproducible run to run - forward and backward") {
  ScopedEnv env("MTNLG_CUDA_ATTENTION", "flash2");
  const std::string block_rows = GENERATE("64", "128");
  ScopedEnv rows("MTNLG_CUDA_FLASH2_ROWS", block_rows);
  const std::string dq_mode = GENERATE("stored", "recompute");  // MTNLG_CUDA_FLASH2_DQ
  ScopedEnv dq("MTNLG_CUDA_FLASH2_DQ", dq_mode);
  INFO(block_rows << "-row forward blocks, dq " << dq_mode);
  Twin tw;
  // ragged: 5 blocks, the last of 44 rows
  check_attention_reruns_bitwise(tw, 2, 300, 2, 64);
}

}  // namespace
}  // namespace mtnlg::test
