// The FA2-style attention forward (core/kernels/flash2_forward.h), its every thread run as a
// fiber by tests/core/simt_emulator.h with the warp shuffles and mma.m16n8k16 products emulated
// from mma_fragment.h's layouts: out and the log-sum-exps against the CPU backend in float64,
// bf16 and fp16, with and without dropout, ragged sequences; the same bits with the threads
// run in reverse order (no races on shared memory); and the emulator's own checks (a product
// against a plain matrix product, divergent warps and unmatched barriers reported).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/backend.h"
#include "core/kernels/flash2_forward.h"
#include "kernel_check.h"
#include "simt_emulator.h"

using namespace mtnlg;
using namespace mtnlg::test;
namespace f2 = mtnlg::kernels::flash2;
namespace fl = mtnlg::kernels::flash;
namespace mma = mtnlg::kernels::mma;

namespace {

struct Case {
  int64_t b, s, heads, hd;
};

template <typename T, int HD>
void forward_all(const fl::ForwardArgs<T>& a, bool reverse) {
  const fl::Dims& d = a.d;
  SimtBlock block(f2::kThreads, f2::smem_bytes<T>(HD), reverse);
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t rb = 0; rb < fl::query_blocks(d.s); ++rb) {
        const std::string err = block.run(
            [&](SimtThread& w) { f2::forward_thread<T, HD>(w, block.smem(), a, b, h, rb); });
        REQUIRE(err.empty());
      }
}

template <typename T>
std::pair<Tensor, Tensor> run(const Case& c, const Tensor& qkv, double p, RngStream rng,
                              bool reverse) {
  Tensor out = Tensor::cpu({c.b, c.s, c.heads * c.hd}, qkv.dtype());
  Tensor lse = Tensor::cpu({c.b, c.heads, c.s}, DType::kF32);
  const fl::ForwardArgs<T> a{qkv.data_as<T>(),
                             out.data_as<T>(),
                             lse.data_as<float>(),
                             fl::Dims{c.b, c.s, c.heads, c.hd},
                             1.0f / std::sqrt(static_cast<float>(c.hd)),
                             static_cast<float>(p),
                             p > 0 ? kernels::dropout_scale(static_cast<float>(p)) : 1.0f,
                             rng};
  switch (c.hd) {
    case 16:
      forward_all<T, 16>(a, reverse);
      break;
    case 64:
      forward_all<T, 64>(a, reverse);
      break;
    case 128:
      forward_all<T, 128>(a, reverse);
      break;
    default:
      FAIL("no instance for head size " << c.hd);
  }
  return {out, lse};
}

Tensor to_f64(const Tensor& t) {
  Tensor o = Tensor::cpu(t.shape(), DType::kF64);
  for (int64_t i = 0; i < t.numel(); ++i) o.data_as<double>()[i] = value_at(t, i);
  return o;
}

// Worst |got - want| over u (|want| + max |want|), as tests/core/flash_attention_test.cc.
double worst_roundings(const Tensor& got, const Tensor& want, double u) {
  const auto g = to_vec(got), w = to_vec(want);
  REQUIRE(g.size() == w.size());
  double mx = 0;
  for (double v : w) mx = std::max(mx, std::abs(v));
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double r = std::abs(g[i] - w[i]) / (u * (std::abs(w[i]) + mx) + 1e-300);
    if (!(r <= worst)) worst = r;  // NaN is worst
  }
  return worst;
}

template <typename T>
void check_against_cpu(DType dt, const Case& c, double p) {
  INFO(dtype_name(dt) << " b " << c.b << " s " << c.s << " heads " << c.heads << " hd " << c.hd
                      << " dropout " << p);
  const RngStream rng{42, 3, 0};
  const Tensor qkv = random_tensor({c.b, c.s, c.heads * 3 * c.hd}, dt, 1, -2.0, 2.0);
  const auto [out, lse] = run<T>(c, qkv, p, rng, false);

  auto cpu = make_cpu_backend(1);
  Tensor want = Tensor::cpu({c.b, c.s, c.heads * c.hd}, DType::kF64);
  Tensor want_lse = Tensor::cpu({c.b, c.heads, c.s}, DType::kF64);
  cpu->attention_forward(want, want_lse, to_f64(qkv), c.heads, p, rng);
  const double u = dt == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048;
  // The flash kernels' bounds: fp32 sums of the same narrow scores; out one rounding of its own
  // plus the probabilities' (rounded before the product with v).
  CHECK(worst_roundings(lse, want_lse, 1.0 / (1 << 23)) < 16);
  CHECK(worst_roundings(out, want, u) < 2);

  const auto [rev_out, rev_lse] = run<T>(c, qkv, p, rng, true);
  CHECK(bitwise_equal(rev_out, out));
  CHECK(bitwise_equal(rev_lse, lse));
}

}  // namespace

TEST_CASE("FA2 forward matches the CPU backend in float64 - with and without dropout") {
  const double p = GENERATE(0.0, 0.2);
  // s: one row, a partial tile, exactly one tile, several tiles with a ragged end; the kernels'
  // head sizes 64 and 128, and 16 (the same program, smaller registers) over more tiles.
  const Case c = GENERATE(Case{2, 1, 2, 64}, Case{2, 50, 3, 64}, Case{1, 64, 2, 64},
                          Case{2, 130, 2, 64}, Case{1, 70, 1, 128}, Case{1, 200, 2, 16});
  check_against_cpu<Bf16>(DType::kBF16, c, p);
  check_against_cpu<F16>(DType::kF16, c, p);
}

TEST_CASE("FA2 forward's shared memory and head sizes") {
  // 64 + 2 x 64 rows of hd + 8 two-byte elements: under the 48 KiB a block takes without opting
  // in at head size 64, 52 KiB at 128 (A100: 163 KiB).
  CHECK(f2::smem_bytes<Bf16>(64) == 192 * 72 * 2);
  CHECK(f2::smem_bytes<Bf16>(128) == 192 * 136 * 2);
  CHECK(f2::head_dim_supported(64));
  CHECK(f2::head_dim_supported(128));
  CHECK_FALSE(f2::head_dim_supported(160));  // the 530B recipe's: the other kernels
}

TEST_CASE("the SIMT emulator's mma is the matrix product of the fragments' layouts") {
  // A [16 x 16] and B [16 x 8] row-major, loaded into fragments by the layout functions; the
  // emulated product must be A B + C, element for element (exact: small integers).
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> small(-4, 4);
  float a[16][16], b[16][8], c[16][8];
  for (auto& row : a)
    for (float& x : row) x = static_cast<float>(small(gen));
  for (auto& row : b)
    for (float& x : row) x = static_cast<float>(small(gen));
  for (auto& row : c)
    for (float& x : row) x = static_cast<float>(small(gen));
  std::vector<float> got(16 * 8, NAN);
  for (const bool bf16 : {true, false}) {
    SimtBlock block(32, 0, false);
    const auto bits = [&](float x) { return bf16 ? Bf16(x).bits : F16(x).bits; };
    const std::string err = block.run([&](SimtThread& w) {
      const int lane = w.thread();
      uint32_t fa[4], fb[2];
      float fc[4];
      for (int r = 0; r < 4; ++r) {
        const mma::Coord lo = mma::a_element(lane, 2 * r), hi = mma::a_element(lane, 2 * r + 1);
        fa[r] = mma::pack(bits(a[lo.row][lo.col]), bits(a[hi.row][hi.col]));
      }
      for (int r = 0; r < 2; ++r) {
        const mma::Coord lo = mma::b_element(lane, 2 * r), hi = mma::b_element(lane, 2 * r + 1);
        fb[r] = mma::pack(bits(b[lo.row][lo.col]), bits(b[hi.row][hi.col]));
      }
      for (int e = 0; e < 4; ++e) {
        const mma::Coord x = mma::c_element(lane, e);
        fc[e] = c[x.row][x.col];
      }
      if (bf16)
        w.mma<Bf16>(fc, fa, fb);
      else
        w.mma<F16>(fc, fa, fb);
      for (int e = 0; e < 4; ++e) {
        const mma::Coord x = mma::c_element(lane, e);
        got[static_cast<size_t>(x.row * 8 + x.col)] = fc[e];
      }
    });
    REQUIRE(err.empty());
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 8; ++j) {
        float want = c[i][j];
        for (int k = 0; k < 16; ++k) want += a[i][k] * b[k][j];
        CHECK(got[static_cast<size_t>(i * 8 + j)] == want);
      }
  }
  // Every (row, col) of each operand is some lane's element exactly once.
  int seen_a[16][16] = {}, seen_b[16][8] = {}, seen_c[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    for (int e = 0; e < 8; ++e) ++seen_a[mma::a_element(lane, e).row][mma::a_element(lane, e).col];
    for (int e = 0; e < 4; ++e) {
      ++seen_b[mma::b_element(lane, e).row][mma::b_element(lane, e).col];
      ++seen_c[mma::c_element(lane, e).row][mma::c_element(lane, e).col];
    }
  }
  for (auto& row : seen_a)
    for (int n : row) CHECK(n == 1);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      CHECK(seen_b[i][j] == 1);
      CHECK(seen_c[i][j] == 1);
    }
}

TEST_CASE("the SIMT emulator reports divergent warps and unmatched barriers") {
  SimtBlock block(64, 0, false);
  // Shuffles: lane l gets lane l ^ 1's value.
  std::vector<float> got(64);
  REQUIRE(block
              .run([&](SimtThread& w) {
                got[static_cast<size_t>(w.thread())] =
                    w.shfl_xor(static_cast<float>(w.thread()), 1);
              })
              .empty());
  for (int i = 0; i < 64; ++i) CHECK(got[static_cast<size_t>(i)] == static_cast<float>(i ^ 1));
  // Half a warp shuffles, the other half waits at a barrier.
  CHECK_THAT(block.run([&](SimtThread& w) {
    if (w.thread() % 32 < 16)
      (void)w.shfl_xor(1.0f, 1);
    else
      w.sync();
  }),
             Catch::Contains("different collectives"));
  // One warp at a barrier the other never reaches.
  CHECK_THAT(block.run([&](SimtThread& w) {
    if (w.thread() < 32) w.sync();
  }),
             Catch::Contains("no progress"));
}
