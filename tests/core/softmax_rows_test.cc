// The blocked attention's register softmax rows (core/kernels/softmax_rows.h), every lane run as a
// fiber by tests/core/simt_emulator.h with its warp shuffles: forward's log-sum-exp against a
// float64 sum, its probabilities and dropped probabilities bit for bit against exp(x - lse)
// rounded once and core/rng.h's dropout_keep (not the KeepMask the program uses), zeros between
// the diagonal and the end of the causal block and nothing written past it; backward's softmax
// gradient against float64 and dV's operand bit for bit. fp32, bf16 and fp16; rows of every
// chunk count, stream offsets that do and do not start a Philox block.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/kernels/bf16_math.h"
#include "core/kernels/softmax_rows.h"
#include "core/rng.h"
#include "simt_emulator.h"

using namespace mtnlg;
using namespace mtnlg::test;
namespace sr = mtnlg::kernels::softmax_rows;

namespace {

constexpr int kRowsPerRun = 4;  // warps of an emulated block, one row each

template <typename T>
uint32_t bits_of(T v) {
  if constexpr (sizeof(T) == 2) {
    return v.bits;
  } else {
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
  }
}

template <typename T>
T sentinel() {
  if constexpr (std::is_same_v<T, float>) {
    return 1234.5f;
  } else {
    T t;
    t.bits = 0x7e01;  // a NaN pattern no program writes
    return t;
  }
}

// The rows of one [1 head, s, s] score matrix a case checks: all for short rows, else the edges
// of chunks and causal blocks and some others.
std::vector<int64_t> rows_to_check(int64_t s, int64_t block) {
  std::vector<int64_t> rows;
  if (s <= 160) {
    for (int64_t i = 0; i < s; ++i) rows.push_back(i);
    return rows;
  }
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{4}, int64_t{127}, int64_t{128},
                    int64_t{129}, block - 1, block, block + 5, s / 2 + 3, s - 2, s - 1})
    if (i >= 0 && i < s) rows.push_back(i);
  return rows;
}

// Runs f(w, row) in blocks of kRowsPerRun warps, one warp per row; fails the test on an
// emulator error (a lane missing a shuffle).
template <typename F>
void for_rows(const std::vector<int64_t>& rows, F&& f) {
  SimtBlock block(32 * kRowsPerRun, 0, Schedule::kLockstep);
  for (size_t r0 = 0; r0 < rows.size(); r0 += kRowsPerRun) {
    const size_t n = std::min<size_t>(kRowsPerRun, rows.size() - r0);
    const std::string err = block.run([&](SimtThread& w) {
      // Warps past the last row have none: they return before any shuffle, as on the GPU.
      const auto k = static_cast<size_t>(w.thread() / 32);
      if (k < n) f(w, rows[r0 + k]);
    });
    REQUIRE(err == "");  // prints the emulator's error
  }
}

template <typename F>
void with_chunks(int64_t s, F&& f) {
  switch (sr::chunks_for(s)) {
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 8:
      return f(std::integral_constant<int, 8>{});
    case 16:
      return f(std::integral_constant<int, 16>{});
    default:
      FAIL("no chunk count for s " << s);
  }
}

// The causal block's end for row i, as attention_cuda.cu's kernels take it.
int64_t block_end(int64_t i, int64_t s, int64_t block) {
  return std::min((i / block + 1) * block, s);
}

// The spacing of T's subnormals: fp16's (2^-24) is far above a softmax gradient's smallest.
template <typename T>
double tiny() {
  return std::is_same_v<T, F16> ? std::ldexp(1.0, -24) : 0.0;
}

// One bf16/fp16/fp32 rounding of v, the bound of a value rounded once to T.
template <typename T>
double unit() {
  if constexpr (std::is_same_v<T, Bf16>) return std::ldexp(1.0, -8);
  if constexpr (std::is_same_v<T, F16>) return std::ldexp(1.0, -11);
  return std::ldexp(1.0, -23);
}

template <typename T>
void check_forward(int64_t s, int64_t block, float p, bool want_p, bool want_pd, uint64_t offset) {
  std::mt19937 gen(static_cast<uint32_t>(s * 7 + offset));
  std::uniform_real_distribution<float> score(-6.0f, 6.0f);
  std::vector<float> x(static_cast<size_t>(s * s));
  for (float& v : x) v = score(gen);
  std::vector<T> pout(x.size(), sentinel<T>()), pdout(x.size(), sentinel<T>());
  std::vector<float> lse(static_cast<size_t>(s), -1.0f);
  const RngStream rng{77, 5, offset};
  const float scale = p > 0 ? kernels::dropout_scale(p) : 1.0f;
  const uint64_t elem0 = 4096;  // the sequence's first element, as for sequence 1 of s = 32
  const std::vector<int64_t> rows = rows_to_check(s, block);
  with_chunks(s, [&](auto chunks) {
    for_rows(rows, [&](SimtThread& w, int64_t i) {
      const sr::Row r{i, block_end(i, s, block), elem0 + static_cast<uint64_t>(i * s)};
      sr::forward_row<T, decltype(chunks)::value>(
          w, w.thread() % 32, want_p ? pout.data() + i * s : nullptr,
          want_pd ? pdout.data() + i * s : nullptr, lse.data() + i, x.data() + i * s, r, p, scale,
          rng);
    });
  });
  for (int64_t i : rows) {
    INFO("row " << i << " of s " << s << ", dropout " << p << ", offset " << offset);
    const float* xr = x.data() + i * s;
    double mx = xr[0], sum = 0;
    for (int64_t j = 0; j <= i; ++j) mx = std::max<double>(mx, xr[j]);
    for (int64_t j = 0; j <= i; ++j) sum += std::exp(xr[j] - mx);
    const double ref = mx + std::log(sum);
    const float l = lse[static_cast<size_t>(i)];
    CHECK(std::abs(l - ref) <= 4e-6 * std::max(1.0, std::abs(ref)));
    const int64_t end = block_end(i, s, block);
    for (int64_t j = 0; j < s; ++j) {
      const size_t at = static_cast<size_t>(i * s + j);
      const float e = j <= i ? expf(xr[j] - l) : 0.0f;
      const bool keep = j <= i && dropout_keep(rng, elem0 + static_cast<uint64_t>(i * s + j), p);
      const T want_e = j < end ? T(e) : sentinel<T>();
      const T want_d = j < end ? T(keep ? e * scale : 0.0f) : sentinel<T>();
      if (want_p && bits_of(pout[at]) != bits_of(want_e)) FAIL_CHECK("p at column " << j);
      if (want_pd && bits_of(pdout[at]) != bits_of(want_d)) FAIL_CHECK("pd at column " << j);
    }
  }
  if (!want_p)
    for (const T& v : pout) REQUIRE(bits_of(v) == bits_of(sentinel<T>()));
}

template <typename T>
void check_backward(int64_t s, int64_t block, float p, uint64_t offset) {
  std::mt19937 gen(static_cast<uint32_t>(s * 11 + offset));
  std::uniform_real_distribution<float> score(-4.0f, 4.0f), grad(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(s * s)), dpd(x.size()), lse(static_cast<size_t>(s));
  for (float& v : x) v = score(gen);
  for (float& v : dpd) v = grad(gen);
  for (int64_t i = 0; i < s; ++i) {
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) sum += std::exp(static_cast<double>(x[i * s + j]));
    lse[static_cast<size_t>(i)] = static_cast<float>(std::log(sum));
  }
  std::vector<T> ds(x.size(), sentinel<T>()), pv(x.size(), sentinel<T>());
  const RngStream rng{78, 6, offset};
  const float scale = p > 0 ? kernels::dropout_scale(p) : 1.0f;
  const uint64_t elem0 = 0;
  const std::vector<int64_t> rows = rows_to_check(s, block);
  with_chunks(s, [&](auto chunks) {
    for_rows(rows, [&](SimtThread& w, int64_t i) {
      const sr::Row r{i, block_end(i, s, block), elem0 + static_cast<uint64_t>(i * s)};
      sr::backward_row<T, decltype(chunks)::value>(
          w, w.thread() % 32, ds.data() + i * s, pv.data() + i * s, dpd.data() + i * s,
          x.data() + i * s, lse[static_cast<size_t>(i)], r, p, scale, rng);
    });
  });
  for (int64_t i : rows) {
    INFO("row " << i << " of s " << s << ", dropout " << p << ", offset " << offset);
    const float l = lse[static_cast<size_t>(i)];
    std::vector<float> pr(static_cast<size_t>(i + 1)), dd(pr.size());
    std::vector<bool> keep(pr.size());
    double dot = 0, mag = 0;
    for (int64_t j = 0; j <= i; ++j) {
      const auto k = static_cast<size_t>(j);
      pr[k] = static_cast<float>(T(expf(x[i * s + j] - l)));
      keep[k] = p <= 0 || dropout_keep(rng, elem0 + static_cast<uint64_t>(i * s + j), p);
      dd[k] = keep[k] ? (p > 0 ? dpd[i * s + j] * scale : dpd[i * s + j]) : 0.0f;
      dot += static_cast<double>(dd[k]) * pr[k];
      mag += std::abs(static_cast<double>(dd[k]) * pr[k]);
    }
    const int64_t end = block_end(i, s, block);
    for (int64_t j = 0; j < s; ++j) {
      const size_t at = static_cast<size_t>(i * s + j);
      if (j >= end) {
        if (bits_of(ds[at]) != bits_of(sentinel<T>()) || bits_of(pv[at]) != bits_of(sentinel<T>()))
          FAIL_CHECK("written past the causal block at column " << j);
        continue;
      }
      if (j > i) {
        if (bits_of(ds[at]) != 0 || bits_of(pv[at]) != 0) FAIL_CHECK("nonzero past i at " << j);
        continue;
      }
      const auto k = static_cast<size_t>(j);
      const double want = pr[k] * (dd[k] - dot);
      // One rounding to T (subnormal in fp16), and the fp32 dot's sum in another order (1e-6
      // of its terms' sum).
      const double bound = unit<T>() * std::abs(want) + tiny<T>() + pr[k] * (1e-6 * mag + 1e-30);
      if (std::abs(static_cast<float>(ds[at]) - want) > bound)
        FAIL_CHECK("ds at column " << j << ": " << static_cast<float>(ds[at]) << " vs " << want);
      const T want_pv = T(keep[k] ? (p > 0 ? pr[k] * scale : pr[k]) : 0.0f);
      if (bits_of(pv[at]) != bits_of(want_pv)) FAIL_CHECK("pv at column " << j);
    }
  }
}

}  // namespace

TEST_CASE("chunks_for: 4 8 or 16 chunks of 128 columns and 0 where the register rows do not fit") {
  CHECK(sr::chunks_for(4) == 4);
  CHECK(sr::chunks_for(512) == 4);
  CHECK(sr::chunks_for(516) == 8);
  CHECK(sr::chunks_for(1024) == 8);
  CHECK(sr::chunks_for(1028) == 16);
  CHECK(sr::chunks_for(2048) == 16);
  CHECK(sr::chunks_for(2052) == 0);  // longer rows: the loop kernels
  CHECK(sr::chunks_for(67) == 0);    // not a multiple of 4
  CHECK(sr::chunks_for(0) == 0);
}

TEST_CASE("softmax rows forward: log-sum-exp and probabilities with and without dropout") {
  const float p = GENERATE(0.0f, 0.15f);
  // Offset 2: a lane's four columns straddle two Philox blocks.
  const uint64_t offset = GENERATE(uint64_t{0}, uint64_t{2});
  // 64 and 132: one causal block; 520 and 1100: blocks of 192 and 320 rows (causal_block).
  const int64_t s = GENERATE(int64_t{64}, int64_t{132}, int64_t{520}, int64_t{1100});
  const int64_t block = s <= 256 ? s : (s == 520 ? 192 : 320);
  // Both outputs, or the one each attention_cuda.cu call asks for.
  check_forward<float>(s, block, p, true, true, offset);
  check_forward<Bf16>(s, block, p, p == 0.0f, p > 0.0f, offset);
  check_forward<F16>(s, block, p, true, true, offset);
}

TEST_CASE("softmax rows backward: the softmax gradient and dV's operand") {
  const float p = GENERATE(0.0f, 0.15f);
  const uint64_t offset = GENERATE(uint64_t{0}, uint64_t{2});
  const int64_t s = GENERATE(int64_t{64}, int64_t{132}, int64_t{520}, int64_t{2048});
  const int64_t block = s <= 256 ? s : (s == 520 ? 192 : 512);
  check_backward<float>(s, block, p, offset);
  check_backward<Bf16>(s, block, p, offset);
  check_backward<F16>(s, block, p, offset);
}
