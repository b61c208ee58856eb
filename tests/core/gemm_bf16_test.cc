// bf16 GEMM (oneDNN matmul, core/cpu/matmul_bf16.h) through Backend::gemm against an fp64
// product of the same bf16 numbers, within the error bound the formats give; and the bf16
// rounding it relies on.
#include <omp.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>

#include "core/backend.h"
#include "core/cpu/matmul_bf16.h"
#include "core/cpu/openblas_sgemm.h"
#include "core/kernels/bf16_math.h"
#include "core/status.h"
#include "test_util.h"

using namespace mtnlg;

namespace {

// A bf16 tensor of uniform values in [-1, 1), deterministic in seed, and the same numbers as
// doubles (exact: bf16 is a subset of double).
Tensor random_bf16(const Shape& shape, uint64_t seed, std::vector<double>& exact) {
  Tensor t = Tensor::cpu(shape, DType::kBF16);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  auto* bits = static_cast<uint16_t*>(t.data());
  exact.resize(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    bits[i] = f32_to_bf16(static_cast<float>(dist(gen)));
    exact[static_cast<size_t>(i)] = bf16_to_f32(bits[i]);
  }
  return t;
}

double value_at(const Tensor& c, int64_t i) {
  return c.dtype() == DType::kF32 ? c.data_as<float>()[i]
                                  : bf16_to_f32(static_cast<const uint16_t*>(c.data())[i]);
}

// Checks c = alpha * op(a) op(b) + beta * c0 element by element. The bound: the products of two
// bf16 numbers (8-bit significands) are exact in fp32; a sum of k of them in fp32, in any order
// (AMX adds pairs, oneDNN blocks k), is within gamma(k - 1) * sum |a_p b_p| of the exact sum,
// gamma(n) = n u / (1 - n u), u = 2^-24; scaling by alpha, adding beta * c0 and rounding them
// add at most 3 more roundings: gamma(k + 2) * (|alpha| sum |a_p b_p| + |beta c0|). A bf16
// output is rounded once more, by at most 2^-8 of its value.
using GemmRunner = std::function<void(Tensor& c, const Tensor& a, bool ta, const Tensor& b, bool tb,
                                      double alpha, double beta)>;

void check_gemm_with(const GemmRunner& run, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                     DType c_dtype, double alpha, double beta) {
  INFO(m << "x" << n << "x" << k << " trans_a " << ta << " trans_b " << tb << " c "
         << dtype_name(c_dtype) << " alpha " << alpha << " beta " << beta);
  std::vector<double> va, vb, vc0;
  const Tensor a = random_bf16(ta ? Shape{k, m} : Shape{m, k}, 1, va);
  const Tensor b = random_bf16(tb ? Shape{n, k} : Shape{k, n}, 2, vb);
  Tensor c;
  if (c_dtype == DType::kBF16) {
    c = random_bf16({m, n}, 3, vc0);
  } else {
    c = Tensor::cpu({m, n}, DType::kF32);
    std::vector<double> tmp;
    const Tensor src = random_bf16({m, n}, 3, tmp);
    for (int64_t i = 0; i < m * n; ++i) c.data_as<float>()[i] = static_cast<float>(tmp[i] * 0.75);
    for (int64_t i = 0; i < m * n; ++i) vc0.push_back(c.data_as<float>()[i]);
  }
  run(c, a, ta, b, tb, alpha, beta);
  const double u = std::ldexp(1.0, -24);
  const double gamma = static_cast<double>(k + 2) * u / (1.0 - static_cast<double>(k + 2) * u);
  int64_t worst = -1;
  double worst_ratio = 0.0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0.0, magnitude = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = va[static_cast<size_t>(ta ? p * m + i : i * k + p)];
        const double y = vb[static_cast<size_t>(tb ? j * k + p : p * n + j)];
        exact += x * y;
        magnitude += std::fabs(x * y);
      }
      const double c0 = vc0[static_cast<size_t>(i * n + j)];
      const double want = alpha * exact + beta * c0;
      double bound = gamma * (std::fabs(alpha) * magnitude + std::fabs(beta * c0));
      if (c_dtype == DType::kBF16) bound += std::ldexp(1.0, -8) * (std::fabs(want) + bound);
      const double err = std::fabs(value_at(c, i * n + j) - want);
      const double ratio = err / (bound > 0 ? bound : 1e-300);
      if (ratio > worst_ratio) {
        worst_ratio = ratio;
        worst = i * n + j;
      }
    }
  INFO("worst element " << worst << ": error / bound = " << worst_ratio);
  CHECK(worst_ratio <= 1.0);
}

void check_gemm(Backend& be, int64_t m, int64_t n, int64_t k, bool ta, bool tb, DType c_dtype,
                double alpha, double beta) {
  check_gemm_with([&](Tensor& c, const Tensor& a, bool ta_, const Tensor& b, bool tb_, double al,
                      double be_) { be.gemm(c, a, ta_, b, tb_, al, be_); },
                  m, n, k, ta, tb, c_dtype, alpha, beta);
}

}  // namespace

TEST_CASE("f32 -> bf16 rounds to nearest even - NaN stays NaN - infinities stay") {
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  CHECK(bf16_to_f32(0x3f80) == 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even significand (1).
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up to the even one.
  CHECK(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
  CHECK(f32_to_bf16(-2.5f) == 0xc020);
  CHECK(f32_to_bf16(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // The largest finite float rounds up to infinity, as the hardware does.
  CHECK(f32_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);
  // Every bf16 value converts back exactly.
  for (uint32_t h = 0; h < 0x10000; h += 7) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) CHECK(f32_to_bf16(f) == h);
  }
}

TEST_CASE("bf16 gemm is within the bf16/fp32 error bound of an fp64 product") {
  auto be = make_cpu_backend(2);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (DType c_dtype : {DType::kF32, DType::kBF16})
        check_gemm(*be, 37, 29, 41, ta, tb, c_dtype, 1.0, 0.0);
  check_gemm(*be, 37, 29, 41, false, true, DType::kF32, 0.7, 0.3);
  check_gemm(*be, 37, 29, 41, true, false, DType::kBF16, -1.5, 1.0);
  check_gemm(*be, 1, 1, 1, false, false, DType::kF32, 1.0, 0.0);
  // A GPT-2 MLP product (h 768, ffn 3072) on 64 tokens, forward and the weight gradient's shape.
  check_gemm(*be, 64, 3072, 768, false, true, DType::kF32, 1.0, 0.0);
  check_gemm(*be, 768, 3072, 64, true, false, DType::kF32, 1.0, 1.0);
}

TEST_CASE("bf16 gemm primitives are made once per shape") {
  if (!cpu::MatmulBf16::onednn_available())
    test::skip_test(
        "oneDNN has no bf16 matmul on this CPU: no primitives (the fp32 fallback runs)");
  cpu::MatmulBf16 mm;
  std::vector<double> unused;
  Tensor a = random_bf16({8, 16}, 1, unused), b = random_bf16({16, 4}, 2, unused);
  Tensor c = Tensor::cpu({8, 4}, DType::kF32);
  const auto run = [&](float beta) {
    mm.run(c.data(), false, static_cast<const uint16_t*>(a.data()), false,
           static_cast<const uint16_t*>(b.data()), false, 8, 4, 16, 1.0f, beta);
  };
  run(0.0f);
  run(0.0f);
  CHECK(mm.cached() == 1);
  run(1.0f);  // another epilogue: another primitive
  CHECK(mm.cached() == 2);
}

TEST_CASE("bf16 gemm refuses mixed operands") {
  auto be = make_cpu_backend(1);
  Tensor a = Tensor::cpu({3, 4}, DType::kBF16), b = Tensor::cpu({4, 2}, DType::kF32);
  Tensor c = Tensor::cpu({3, 2}, DType::kF32);
  CHECK_THROWS_WITH(be->gemm(c, a, false, b, false, 1.0, 0.0),
                    Catch::Contains("bf16 a needs bf16 b"));
}

TEST_CASE("backend copy converts f32 <-> bf16 as f32_to_bf16 rounds - both ways") {
  auto be = make_cpu_backend(2);
  const int64_t n = 100'003;  // odd: the vector loop's tail too
  Tensor f = Tensor::cpu({n}, DType::kF32);
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<float> dist(-1e4f, 1e4f);
  for (int64_t i = 0; i < n; ++i) f.data_as<float>()[i] = dist(gen);
  f.data_as<float>()[0] = 1.0f + std::ldexp(1.0f, -8);  // a tie: to even
  Tensor h = Tensor::cpu({n}, DType::kBF16);
  be->copy(h, f);
  Tensor back = Tensor::cpu({n}, DType::kF32);
  be->copy(back, h);
  const auto* bits = static_cast<const uint16_t*>(h.data());
  CHECK(bits[0] == 0x3f80);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float x = f.data_as<float>()[i];
    wrong += bits[i] != f32_to_bf16(x);
    // Within half a bf16 ulp: |x - bf16(x)| <= 2^-8 |x|.
    wrong += std::fabs(back.data_as<float>()[i] - x) > std::ldexp(std::fabs(x), -8);
  }
  CHECK(wrong == 0);
}

// Frozen-weights windows (core/backend.h): gemm_weight inside one keeps each weight's oneDNN
// blocked copy; results must be bit for bit those of gemm(), for padded shapes (oneDNN rounds
// k and n up to its blocks) and both transposes, at several row counts for the same weight.
TEST_CASE(
    "bf16 gemm_weight in a frozen window equals gemm bit for bit - copies freed when unused") {
  auto be = make_cpu_backend(2);
  std::vector<double> unused;
  for (bool tw : {true, false})
    for (auto [n, k] : {std::pair<int64_t, int64_t>{29, 41}, {96, 32}, {768, 256}}) {
      INFO("n " << n << " k " << k << " trans_w " << tw);
      const Tensor w = random_bf16(tw ? Shape{n, k} : Shape{k, n}, 7, unused);
      const int64_t live_before = be->live_bytes();
      {
        FrozenWeights frozen(*be);
        int64_t held = 0;
        for (int64_t m : {64, 5, 64}) {
          const Tensor a = random_bf16({m, k}, 8 + static_cast<uint64_t>(m), unused);
          Tensor want = Tensor::cpu({m, n}, DType::kBF16), got = Tensor::cpu({m, n}, DType::kBF16);
          be->gemm(want, a, false, w, tw, 1.0, 0.0);
          be->gemm_weight(got, a, w, tw, 1.0, 0.0);
          CHECK(std::memcmp(want.data(), got.data(), want.nbytes()) == 0);
          if (m == 64 && held == 0) {
            held = be->live_bytes() - live_before;
            // The copy is what the planner predicts for this problem.
            CHECK(held == cpu::MatmulBf16::weight_copy_bytes(64, n, k, tw, true, 2));
          }
        }
        // The second call with 64 rows reused the first copy instead of making another.
        CHECK(be->live_bytes() - live_before >= held);
        // (OpenBLAS's kernel on an AVX2 CPU reads the bf16 weight as it packs it: no copy.)
        CHECK((held > 0) == !cpu::MatmulBf16::openblas_kernel_default());
      }
      if (cpu::MatmulBf16::openblas_kernel_default()) continue;
      // The copies' memory stays for the next window; a window that does not use them frees it.
      CHECK(be->live_bytes() > live_before);
      { FrozenWeights unused_window(*be); }
      CHECK(be->live_bytes() == live_before);
    }
}

TEST_CASE("a frozen window reuses a weight's copy and a new window sees new weights") {
  auto be = make_cpu_backend(1);
  std::vector<double> unused;
  Tensor w = random_bf16({24, 40}, 1, unused);
  const Tensor a = random_bf16({16, 40}, 2, unused);
  Tensor c1 = Tensor::cpu({16, 24}, DType::kF32), c2 = Tensor::cpu({16, 24}, DType::kF32);
  Tensor want = Tensor::cpu({16, 24}, DType::kF32);
  {
    FrozenWeights frozen(*be);
    be->gemm_weight(c1, a, w, true, 1.0, 0.0);
    const int64_t live = be->live_bytes();
    be->gemm_weight(c2, a, w, true, 1.0, 0.0);
    CHECK(be->live_bytes() == live);                    // no second copy
    if (!cpu::MatmulBf16::openblas_kernel_default()) {  // (that path keeps no copy to guard)
      // A write through the backend into a held weight breaks the window's promise: refused.
      CHECK_THROWS_WITH(be->scale(w, 2.0), Catch::Contains("frozen-weights window"));
      Tensor w_row = w.slice(3, 4);  // any overlap counts
      CHECK_THROWS_WITH(be->fill(w_row, 0.0), Catch::Contains("frozen-weights window"));
      const Tensor other = Tensor::cpu({24, 40}, DType::kBF16);
      CHECK_THROWS_WITH(be->copy(w, other), Catch::Contains("frozen-weights window"));
    }
    CHECK_THROWS_WITH(FrozenWeights(*be), Catch::Contains("do not nest"));
  }
  CHECK(std::memcmp(c1.data(), c2.data(), c1.nbytes()) == 0);
  // After the window the weight may change, and the next window uses the new values.
  be->scale(w, 2.0);
  be->gemm(want, a, false, w, true, 1.0, 0.0);
  {
    FrozenWeights frozen(*be);
    be->gemm_weight(c2, a, w, true, 1.0, 0.0);
  }
  CHECK(std::memcmp(want.data(), c2.data(), want.nbytes()) == 0);
  CHECK(std::memcmp(c1.data(), c2.data(), c1.nbytes()) != 0);
}

// Where oneDNN has no bf16 matmul (AVX2 CPUs) and OpenBLAS's kernel is not found, MatmulBf16
// widens to fp32 and runs the fp32 GEMM: the same error bound against the exact product, in every
// form the model uses; a weight's copy is the widened matrix, shared by both transposes.
TEST_CASE("the bf16 gemm's fp32 fallback is within the bf16 bound - strided batches too") {
  cpu::MatmulBf16 fallback({}, /*use_onednn=*/false, /*use_openblas_kernel=*/false);
  CHECK_FALSE(fallback.uses_onednn());
  CHECK_FALSE(fallback.uses_openblas_kernel());
  for (const bool b_weight : {false, true}) {
    INFO("b a weight " << b_weight);
    const GemmRunner run = [&](Tensor& c, const Tensor& a, bool ta, const Tensor& b, bool tb,
                               double alpha, double beta) {
      const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
      const int64_t n = tb ? b.dim(0) : b.dim(1);
      fallback.run(c.data(), c.dtype() == DType::kBF16, static_cast<const uint16_t*>(a.data()), ta,
                   static_cast<const uint16_t*>(b.data()), tb, m, n, k, static_cast<float>(alpha),
                   static_cast<float>(beta), b_weight);
      // One window a product: the next one's b may come at this one's address. (The last
      // window's copy is kept until a window does not use it.)
      const auto* bp = static_cast<const char*>(b.data());
      CHECK(fallback.holds_weight(bp, bp + b.nbytes()) == b_weight);
      CHECK(fallback.weight_bytes() >= (b_weight ? n * k * 4 : 0));
      fallback.end_weights_window();
    };
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (DType c_dtype : {DType::kF32, DType::kBF16})
          check_gemm_with(run, 37, 29, 41, ta, tb, c_dtype, 1.0, 0.0);
    check_gemm_with(run, 37, 29, 41, true, false, DType::kBF16, -1.5, 1.0);
    check_gemm_with(run, 64, 300, 96, false, true, DType::kF32, 0.7, 0.3);
    check_gemm_with(run, 64, 300, 96, false, false, DType::kBF16, 1.0, 0.0);
    // Long outputs: cut into panels (of c's columns, then rows), each widening its slice.
    for (bool t : {false, true}) {
      check_gemm_with(run, 40, 2000, 300, t, !t, DType::kBF16, 0.5, 1.0);
      check_gemm_with(run, 2000, 40, 300, t, t, DType::kF32, 1.0, 0.5);
      // Long sums: k in fixed chunks, each added into c.
      check_gemm_with(run, 100, 48, 5000, t, !t, DType::kBF16, 0.5, 1.0);
      check_gemm_with(run, 48, 100, 5000, !t, !t, DType::kF32, 1.0, 0.5);
    }
    fallback.end_weights_window();  // frees the copies the last window left
    CHECK(fallback.weight_bytes() == 0);
  }
  {
    // A linear layer's weight [out, in] used both ways in one window (forward x w^T, input
    // gradient dy w) keeps one copy, as the planner counts it.
    std::vector<double> unused;
    const int64_t out = 48, in = 40, rows = 8;
    const Tensor w = random_bf16({out, in}, 13, unused);
    const Tensor x = random_bf16({rows, in}, 14, unused), dy = random_bf16({rows, out}, 15, unused);
    Tensor y = Tensor::cpu({rows, out}, DType::kBF16), dx = Tensor::cpu({rows, in}, DType::kBF16);
    const auto* wp = static_cast<const uint16_t*>(w.data());
    fallback.run(y.data(), true, static_cast<const uint16_t*>(x.data()), false, wp, true, rows, out,
                 in, 1.0f, 0.0f, true);
    fallback.run(dx.data(), true, static_cast<const uint16_t*>(dy.data()), false, wp, false, rows,
                 in, out, 1.0f, 0.0f, true);
    CHECK(fallback.weight_bytes() == out * in * 4);
    CHECK(fallback.holds_weight(wp + 5, wp + 6));
    fallback.end_weights_window();
    CHECK_FALSE(fallback.holds_weight(wp, wp + out * in));  // stale: remade at its next use
  }
  // A strided batch (attention's form: problems 2 apart in an interleaved buffer, rows ld apart)
  // against the same products one by one through the fp32 fallback's dense form.
  std::vector<double> unused;
  const int64_t batch = 3, m = 5, n = 7, k = 6, ld_a = 20, ld_b = 16, ld_c = 9;
  const Tensor a = random_bf16({batch * m * ld_a}, 11, unused);
  const Tensor b = random_bf16({batch * n * ld_b}, 12, unused);
  Tensor c = Tensor::cpu({batch * m * ld_c}, DType::kF32);
  cpu::Bf16Gemm g;
  g.batch = batch;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = static_cast<const uint16_t*>(a.data());
  g.ld_a = ld_a;
  g.stride_a = m * ld_a;
  g.b = static_cast<const uint16_t*>(b.data());
  g.ld_b = ld_b;
  g.stride_b = n * ld_b;
  g.trans_b = true;
  g.c = c.data();
  g.ld_c = ld_c;
  g.stride_c = m * ld_c;
  fallback.run(g);
  std::vector<float> c_first(c.data_as<float>(), c.data_as<float>() + c.numel());
  {
    // The batch's problems split over threads: the same bits on one thread as on two.
    const int before = omp_get_max_threads();
    omp_set_num_threads(before == 1 ? 2 : 1);
    fallback.run(g);
    omp_set_num_threads(before);
    CHECK(std::memcmp(c_first.data(), c.data(), c.nbytes()) == 0);
  }
  for (int64_t p = 0; p < batch; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0.0;
        for (int64_t q = 0; q < k; ++q)
          want += static_cast<double>(bf16_to_f32(g.a[p * m * ld_a + i * ld_a + q])) *
                  bf16_to_f32(g.b[p * n * ld_b + j * ld_b + q]);
        const double got = c.data_as<float>()[p * m * ld_c + i * ld_c + j];
        CHECK(std::fabs(got - want) <= 1e-5 * (1.0 + std::fabs(want)));
      }
}

// The AVX2 fallback through OpenBLAS's own micro-kernel (core/cpu/openblas_sgemm.h): the packing
// against the layout written out here, products against the exact ones, and the bits independent
// of how a product is cut (rows, panels, threads).
TEST_CASE("bf16 packing writes the kernel's layout - groups of the unroll then halving tails") {
  std::mt19937 gen(3);
  for (const int64_t unroll : {4, 8, 16})
    for (const bool rows_contiguous : {true, false})
      for (const auto& [k, rows] : {std::pair<int64_t, int64_t>{1, 1},
                                    {5, 3},
                                    {8, 8},
                                    {17, 2 * unroll + 7},
                                    {33, 3 * unroll}}) {
        INFO("unroll " << unroll << " rows contiguous " << rows_contiguous << " k " << k << " rows "
                       << rows);
        const int64_t ld = (rows_contiguous ? rows : k) + 5;
        std::vector<uint16_t> src(static_cast<size_t>(ld * (rows_contiguous ? k : rows)));
        for (auto& x : src) x = static_cast<uint16_t>(gen() & 0x7f7f);
        const auto at = [&](int64_t i, int64_t l) {
          return bf16_to_f32(src[static_cast<size_t>(rows_contiguous ? i + l * ld : l + i * ld)]);
        };
        // The layout: row groups of `unroll`, then of unroll/2, /4, ... for the rest, each
        // group stored k-major (w values for l = 0, then l = 1, ...) after the ones before it.
        std::vector<float> want;
        int64_t i0 = 0;
        const auto group = [&](int64_t w) {
          for (int64_t l = 0; l < k; ++l)
            for (int64_t i = 0; i < w; ++i) want.push_back(at(i0 + i, l));
          i0 += w;
        };
        while (rows - i0 >= unroll) group(unroll);
        for (int64_t w = unroll / 2; w >= 1; w /= 2)
          if (rows - i0 >= w) group(w);
        REQUIRE(i0 == rows);
        std::vector<float> got(want.size() + 8, -7.0f);
        cpu::OpenblasSgemm::pack(got.data(), src.data(), k, rows, ld, rows_contiguous, unroll);
        CHECK(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)) == 0);
        CHECK(got[want.size()] == -7.0f);  // nothing written past the block
      }
}

TEST_CASE("bf16 products on OpenBLAS's kernel are within the bf16 bound - no weight copies") {
  const cpu::OpenblasSgemm& kernel = cpu::OpenblasSgemm::get();
  if (!kernel.available())
    test::skip_test("OpenBLAS's kernel is not used here: " + kernel.describe());
  cpu::MatmulBf16 mm({}, /*use_onednn=*/false, /*use_openblas_kernel=*/true);
  REQUIRE(mm.uses_openblas_kernel() == !cpu::OpenblasSgemm::disabled_by_env());
  if (!mm.uses_openblas_kernel()) test::skip_test("MTNLG_BF16_FALLBACK=widen is set");
  const GemmRunner run = [&](Tensor& c, const Tensor& a, bool ta, const Tensor& b, bool tb,
                             double alpha, double beta) {
    const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
    const int64_t n = tb ? b.dim(0) : b.dim(1);
    mm.run(c.data(), c.dtype() == DType::kBF16, static_cast<const uint16_t*>(a.data()), ta,
           static_cast<const uint16_t*>(b.data()), tb, m, n, k, static_cast<float>(alpha),
           static_cast<float>(beta), /*b_weight=*/true);
    const auto* bp = static_cast<const char*>(b.data());
    CHECK_FALSE(mm.holds_weight(bp, bp + b.nbytes()));  // read as it is: nothing to go stale
    CHECK(mm.weight_bytes() == 0);
    mm.end_weights_window();
  };
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (DType c_dtype : {DType::kF32, DType::kBF16}) {
        check_gemm_with(run, 37, 29, 41, ta, tb, c_dtype, 1.0, 0.0);
        check_gemm_with(run, 1, 1, 1, ta, tb, c_dtype, 1.0, 0.0);
        // k over several of the kernel's k blocks, with the halved remainder.
        check_gemm_with(run, 19, 45, 1500, ta, tb, c_dtype, -0.5, 0.75);
      }
  // Long outputs in panels, both ways round.
  for (bool t : {false, true}) {
    check_gemm_with(run, 40, 3000, 300, t, !t, DType::kBF16, 0.5, 1.0);
    check_gemm_with(run, 3000, 40, 300, t, t, DType::kF32, 1.0, 0.5);
  }
  // The planner counts no copies where the default instance runs this path.
  if (cpu::MatmulBf16::openblas_kernel_default())
    CHECK(cpu::MatmulBf16::weight_copy_bytes(64, 768, 256, true, true, 2) == 0);
}

// As OpenBLAS's own sgemm (core/cpu/gemm_cpu.cc), the kernel sums an element's k blocks in one
// order but its tile and tail paths round differently, so a product cut elsewhere (another
// thread count) may differ in the last bit: reproducible at a given thread count, and across
// counts within the bound (the test above).
TEST_CASE("bf16 products on OpenBLAS's kernel are bit-reproducible at a given thread count") {
  const cpu::OpenblasSgemm& kernel = cpu::OpenblasSgemm::get();
  if (!kernel.available())
    test::skip_test("OpenBLAS's kernel is not used here: " + kernel.describe());
  cpu::MatmulBf16 mm({}, false, true);
  if (!mm.uses_openblas_kernel()) test::skip_test("MTNLG_BF16_FALLBACK=widen is set");
  std::vector<double> unused;
  const int64_t m = 203, n = 517, k = 777;
  const int before = omp_get_max_threads();
  for (const bool ta : {false, true})
    for (const bool tb : {false, true})
      for (const bool c_bf16 : {false, true})
        for (const int threads : {1, 2}) {
          INFO("trans_a " << ta << " trans_b " << tb << " c bf16 " << c_bf16 << " threads "
                          << threads);
          const Tensor a = random_bf16(ta ? Shape{k, m} : Shape{m, k}, 21, unused);
          const Tensor b = random_bf16(tb ? Shape{n, k} : Shape{k, n}, 22, unused);
          const auto* ap = static_cast<const uint16_t*>(a.data());
          const auto* bp = static_cast<const uint16_t*>(b.data());
          omp_set_num_threads(threads);
          std::vector<float> first(static_cast<size_t>(m * n), 1.0f), again(first.size(), 2.0f);
          mm.run(first.data(), c_bf16, ap, ta, bp, tb, m, n, k, 1.0f, 0.0f);
          mm.run(again.data(), c_bf16, ap, ta, bp, tb, m, n, k, 1.0f, 0.0f);
          const size_t bytes = static_cast<size_t>(m * n) * (c_bf16 ? 2 : 4);
          CHECK(std::memcmp(first.data(), again.data(), bytes) == 0);
          // The row-major wrapper alone, twice: its packing buffers are reused, not reset.
          std::vector<float> x(static_cast<size_t>(m * n)), y(x.size(), 5.0f);
          kernel.gemm(x.data(), n, ap, ta ? m : k, ta, bp, tb ? k : n, tb, m, n, k, 1.0f, 0.0f);
          kernel.gemm(y.data(), n, ap, ta ? m : k, ta, bp, tb ? k : n, tb, m, n, k, 1.0f, 0.0f);
          CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
        }
  omp_set_num_threads(before);
}

TEST_CASE("MTNLG_BF16_FALLBACK=widen selects the widening fallback - a misspelling is an error") {
  {
    test::ScopedEnv env("MTNLG_BF16_FALLBACK", "widen");
    const cpu::MatmulBf16 widened({}, false, true);
    CHECK_FALSE(widened.uses_openblas_kernel());
    CHECK_FALSE(cpu::MatmulBf16::openblas_kernel_default());
  }
  {
    test::ScopedEnv env("MTNLG_BF16_FALLBACK", "kernel");
    const cpu::MatmulBf16 chosen({}, false, true);
    CHECK(chosen.uses_openblas_kernel() == cpu::OpenblasSgemm::get().available());
  }
  {
    // On every CPU, oneDNN's included: the variable is read before the path is chosen.
    test::ScopedEnv env("MTNLG_BF16_FALLBACK", "widened");
    CHECK_THROWS_WITH(cpu::MatmulBf16(), Catch::Contains("MTNLG_BF16_FALLBACK=widened") &&
                                             Catch::Contains("kernel, widen"));
    CHECK_THROWS_WITH(cpu::MatmulBf16::openblas_kernel_default(),
                      Catch::Contains("MTNLG_BF16_FALLBACK"));
  }
  const cpu::MatmulBf16 plain({}, false, true);
  CHECK(plain.uses_openblas_kernel() == cpu::OpenblasSgemm::get().available());
}

// bf16 trains on every CPU: what runs its products is named for the log, oneDNN's kernels where
// it has a bf16 matmul, else the fp32 fallback with the reason.
TEST_CASE("describe names what runs the bf16 products on this CPU") {
  const std::string what = cpu::MatmulBf16::describe();
  INFO(what);
  if (cpu::MatmulBf16::onednn_available()) {
    CHECK(what.rfind("oneDNN AVX512", 0) == 0);
    CHECK(cpu::MatmulBf16().uses_onednn());
  } else {
    CHECK(what.find("fp32 GEMM") != std::string::npos);
    CHECK(what.find("no bf16 matmul") != std::string::npos);
    CHECK_FALSE(cpu::MatmulBf16().uses_onednn());
    CHECK(cpu::MatmulBf16().uses_openblas_kernel() == cpu::MatmulBf16::openblas_kernel_default());
    CHECK((what.find("OpenBLAS's fp32 GEMM kernel (") == 0) ==
          cpu::MatmulBf16::openblas_kernel_default());
  }
  // Found but refused is a bug of ours (a packing or product check failed), not a missing
  // capability: Debian's OpenBLAS exports every family's kernels.
  CHECK(cpu::OpenblasSgemm::get().describe().find("failed a check") == std::string::npos);
  if (cpu::OpenblasSgemm::get().available()) {
    CHECK_FALSE(cpu::OpenblasSgemm::get().describe().empty());
  }
}

// The planner asks oneDNN how large a weight's blocked copy is; oneDNN blocks a weight for the
// threads it will split the product over (on AMX CPUs the copy of one weight differs between 1
// and 2 threads), so the answer must be for the run's thread count whatever the asking thread's
// own OpenMP setting (the trainer plans before its backend sets the count).
TEST_CASE("weight_copy_bytes answers for the run's threads - whatever the caller's setting") {
  // (A CPU without oneDNN's bf16 matmul keeps no copies, and the answer is 0.)
  std::vector<double> unused;
  for (const int threads : {1, 2}) {
    auto be = make_cpu_backend(threads);
    // configs/tiny.yaml's weights on 2 tensor ranks (h 64, ffn 256) at 32 rows, and others.
    for (auto [n, k] : {std::pair<int64_t, int64_t>{96, 64},
                        {64, 32},
                        {128, 64},
                        {64, 128},
                        {256, 64},
                        {1024, 64},
                        {29, 41},
                        {768, 256}}) {
      for (const bool tw : {true, false}) {
        INFO("threads " << threads << " n " << n << " k " << k << " trans_w " << tw);
        const Tensor w = random_bf16(tw ? Shape{n, k} : Shape{k, n}, 9, unused);
        const Tensor a = random_bf16({32, k}, 10, unused);
        Tensor c = Tensor::cpu({32, n}, DType::kBF16);
        { FrozenWeights unused_window(*be); }  // frees the copies earlier shapes left
        const int64_t before = be->live_bytes();
        int64_t held = 0;
        {
          FrozenWeights frozen(*be);
          be->gemm_weight(c, a, w, tw, 1.0, 0.0);
          held = be->live_bytes() - before;
        }
        omp_set_num_threads(3 - threads);  // the other count, as a caller may have
        CHECK(held == cpu::MatmulBf16::weight_copy_bytes(32, n, k, tw, true, threads));
        CHECK(omp_get_max_threads() == 3 - threads);  // the caller's setting is left as it was
      }
    }
  }
}
