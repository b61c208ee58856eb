// The flash attention block programs (core/kernels/flash_attention.h), run on the CPU by an
// emulating executor: forward and backward in bf16 and fp16 against the CPU backend in float64
// (ragged sequences, several heads and batches, dropout on and off), the program's phases free
// of races (threads run in both orders give the same bits), every tensor-core tile aligned and
// inside shared memory as wmma requires, no read of shared memory before it is written (it
// starts as NaN), and the shared memory the 530B recipe's head size needs on an A100.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "attention_check.h"
#include "core/backend.h"
#include "core/kernels/flash_attention.h"
#include "kernel_check.h"

using namespace mtnlg;
using namespace mtnlg::test;
namespace fl = mtnlg::kernels::flash;

namespace {

// Runs a block program's threads one after another (forward or reversed order), the products
// as plain float loops over the same tiles, and checks what wmma requires of each tile. An
// accumulator slot lives in a buffer of its own from zero to flush, as on the GPU in registers:
// home is written only by flush, so a program that reads it early reads shared memory's NaN.
struct HostExec {
  bool reverse = false;
  const char* base = nullptr;  // shared memory
  size_t bytes = 0;
  struct Slot {
    float* home = nullptr;  // null: not started (or flushed)
    int ldc = 0, m = 0, n = 0;
    std::vector<float> value;  // [m][n]
  };
  Slot slots[2];

  template <typename F>
  void threads(F&& f) {
    for (int i = 0; i < fl::kThreads; ++i) f(reverse ? fl::kThreads - 1 - i : i);
  }

  // A fragment at p of 16 rows or columns with leading dimension ld: 32-byte aligned in shared
  // memory and inside it.
  template <typename U>
  void check_tile(const U* p, int ld) {
    const auto off = reinterpret_cast<const char*>(p) - base;
    REQUIRE(off >= 0);
    REQUIRE(off % 32 == 0);
    REQUIRE(ld % (16 / sizeof(U)) == 0);
    REQUIRE(static_cast<size_t>(off) + (15 * static_cast<size_t>(ld) + 16) * sizeof(U) <= bytes);
  }

  // out[m][n] (leading dimension ldo) = (accumulate ? out : 0) + A B, A's and B's tiles
  // checked, and c's (the home whose tiles wmma loads or stores).
  template <bool kArow, bool kBrow, typename T>
  void product(float* out, int ldo, const float* c, int ldc, const T* a, int lda, const T* b,
               int ldb, int m, int n, int k, bool accumulate) {
    REQUIRE(m % 16 == 0);
    REQUIRE(n % 16 == 0);
    REQUIRE(k % 16 == 0);
    for (int i0 = 0; i0 < m; i0 += 16)
      for (int j0 = 0; j0 < n; j0 += 16) {
        check_tile(c + i0 * ldc + j0, ldc);
        for (int l0 = 0; l0 < k; l0 += 16) {
          check_tile(a + (kArow ? i0 * lda + l0 : l0 * lda + i0), lda);
          check_tile(b + (kBrow ? l0 * ldb + j0 : j0 * ldb + l0), ldb);
        }
      }
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        float sum = accumulate ? out[i * ldo + j] : 0.0f;
        for (int l = 0; l < k; ++l) {
          const float x = static_cast<float>(kArow ? a[i * lda + l] : a[l * lda + i]);
          const float y = static_cast<float>(kBrow ? b[l * ldb + j] : b[j * ldb + l]);
          sum += x * y;
        }
        out[i * ldo + j] = sum;
      }
  }

  template <bool kArow, bool kBrow, typename T>
  void mma(float* c, int ldc, const T* a, int lda, const T* b, int ldb, int m, int n, int k,
           bool accumulate) {
    product<kArow, kBrow>(c, ldc, c, ldc, a, lda, b, ldb, m, n, k, accumulate);
  }

  // The slot started by zero<kSlot> with this home and shape.
  template <int kSlot>
  Slot& started(const float* c, int ldc, int m, int n) {
    Slot& s = slots[kSlot];
    REQUIRE(s.home != nullptr);
    REQUIRE(s.home == c);
    REQUIRE(s.ldc == ldc);
    REQUIRE(s.m == m);
    REQUIRE(s.n == n);
    return s;
  }

  template <int kSlot>
  void zero(float* c, int ldc, int m, int n) {
    Slot& s = slots[kSlot];
    REQUIRE(s.home == nullptr);  // flushed before it starts again
    s = Slot{c, ldc, m, n, std::vector<float>(static_cast<size_t>(m) * n, 0.0f)};
  }

  template <int kSlot>
  void scale_rows(const float* c, int ldc, int m, int n, const float* alpha) {
    Slot& s = started<kSlot>(c, ldc, m, n);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) s.value[static_cast<size_t>(i) * n + j] *= alpha[i];
  }

  template <bool kArow, bool kBrow, int kSlot, typename T>
  void mma_acc(const float* c, int ldc, const T* a, int lda, const T* b, int ldb, int m, int n,
               int k) {
    Slot& s = started<kSlot>(c, ldc, m, n);
    product<kArow, kBrow>(s.value.data(), n, c, ldc, a, lda, b, ldb, m, n, k, true);
  }

  template <int kSlot>
  void flush(float* c, int ldc, int m, int n) {
    Slot& s = started<kSlot>(c, ldc, m, n);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) c[i * ldc + j] = s.value[static_cast<size_t>(i) * n + j];
    s.home = nullptr;
  }
};

// 128-byte aligned shared memory, NaN (all ones) before every block.
struct Smem {
  std::vector<char> raw;
  char* base = nullptr;
  size_t bytes = 0;
  explicit Smem(size_t n) : raw(n + 128), bytes(n) {
    const auto addr = reinterpret_cast<uintptr_t>(raw.data());
    base = raw.data() + (128 - addr % 128) % 128;
  }
  HostExec exec(bool reverse) {
    std::fill(base, base + bytes, static_cast<char>(0xff));
    HostExec ex;
    ex.reverse = reverse;
    ex.base = base;
    ex.bytes = bytes;
    return ex;
  }
};

using Case = AttentionCase;
using Result = AttentionResult;

// f(b, h, block) for every block of every head of every sequence: a kernel's grid.
template <typename F>
void for_blocks(const Case& c, int64_t blocks, F&& f) {
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t k = 0; k < blocks; ++k) f(b, h, k);
}

template <typename T>
Result run_flash(const Case& c, const Tensor& qkv, const Tensor& dout, double p, RngStream rng,
                 bool reverse) {
  const fl::Dims d{c.b, c.s, c.heads, c.hd};
  Result r{Tensor::cpu({c.b, c.s, c.heads * c.hd}, qkv.dtype()),
           Tensor::cpu({c.b, c.heads, c.s}, DType::kF32), Tensor::cpu(qkv.shape(), qkv.dtype())};
  const float drop_scale = p > 0 ? kernels::dropout_scale(static_cast<float>(p)) : 1.0f;
  const fl::ForwardArgs<T> fa{qkv.data_as<T>(),
                              r.out.data_as<T>(),
                              r.lse.data_as<float>(),
                              d,
                              attention_score_scale(c.hd),
                              static_cast<float>(p),
                              drop_scale,
                              rng};
  Smem fs(fl::forward_smem_bytes<T>(c.hd));
  for_blocks(c, fl::query_blocks(c.s), [&](int64_t b, int64_t h, int64_t rb) {
    HostExec ex = fs.exec(reverse);
    fl::forward_block<T>(ex, fs.base, fa, b, h, rb);
  });
  std::vector<float> delta(static_cast<size_t>(c.b * c.heads * c.s), NAN);
  const fl::BackwardArgs<T> ba{qkv.data_as<T>(),
                               r.out.data_as<T>(),
                               dout.data_as<T>(),
                               r.lse.data_as<float>(),
                               delta.data(),
                               r.dqkv.data_as<T>(),
                               d,
                               attention_score_scale(c.hd),
                               static_cast<float>(p),
                               drop_scale,
                               rng};
  Smem bs(fl::backward_smem_bytes<T>(c.hd));
  // The dq pass over every block first (it writes delta), then dk and dv: the kernels' order.
  for_blocks(c, fl::query_blocks(c.s), [&](int64_t b, int64_t h, int64_t rb) {
    HostExec ex = bs.exec(reverse);
    fl::dq_block<T>(ex, bs.base, ba, b, h, rb);
  });
  for_blocks(c, fl::key_blocks(c.s), [&](int64_t b, int64_t h, int64_t kb) {
    HostExec ex = bs.exec(reverse);
    fl::dkv_block<T>(ex, bs.base, ba, b, h, kb);
  });
  return r;
}

}  // namespace

TEST_CASE("flash attention blocks match the CPU backend in float64, with and without dropout") {
  const double p = GENERATE(0.0, 0.2);
  // s: one row, a partial tile, exactly one tile, several tiles with a ragged end; head sizes
  // 16 to 64 (every multiple of 16 takes the same code).
  const Case c = GENERATE(Case{2, 1, 2, 16}, Case{2, 50, 3, 16}, Case{1, 64, 2, 32},
                          Case{2, 130, 2, 64}, Case{1, 200, 1, 48});
  check_attention_against_cpu(DType::kBF16, c, p, run_flash<Bf16>);
  check_attention_against_cpu(DType::kF16, c, p, run_flash<F16>);
}

TEST_CASE("flash attention's shared memory fits the GPUs it targets") {
  // A100: 163 KiB a block (opt-in); H100: 227 KiB. The 530B recipe's head size is 160, GPT-2's
  // 64, the 1.3B recipe's 128.
  constexpr size_t kA100 = 166912, kH100 = 232448;
  for (int64_t hd : {64, 128, 160}) {
    INFO("hd " << hd);
    CHECK(fl::forward_smem_bytes<Bf16>(hd) <= kA100);
    CHECK(fl::backward_smem_bytes<Bf16>(hd) <= kA100);
  }
  CHECK(fl::forward_smem_bytes<Bf16>(fl::kMaxHeadDim) <= kH100);
  CHECK(fl::backward_smem_bytes<Bf16>(fl::kMaxHeadDim) <= kH100);
  CHECK(fl::backward_smem_bytes<Bf16>(fl::kMaxHeadDim) > kA100);  // 256: an H100, not an A100
  CHECK(fl::head_dim_supported(160));
  CHECK_FALSE(fl::head_dim_supported(72));
  CHECK_FALSE(fl::head_dim_supported(fl::kMaxHeadDim + 16));
}

TEST_CASE("warp grids: each warp's tiles as dealt round-robin - every tile exactly once") {
  constexpr int kWarps = fl::kThreads / 32;
  for (const int m : {16, 32, 48, 64}) {
    for (int n = 16; n <= fl::kMaxHeadDim; n += 16) {
      INFO("m " << m << " n " << n);
      const int tile_cols = n / 16, tiles = (m / 16) * tile_cols;
      std::vector<int> seen(static_cast<size_t>(tiles), 0);
      bool all_grids = true;
      for (int w = 0; w < kWarps; ++w) {
        std::vector<int> dealt;  // the round-robin deal
        for (int t = w; t < tiles; t += kWarps) dealt.push_back(t);
        const fl::WarpGrid g = fl::warp_grid(w, kWarps, m, n);
        all_grids = all_grids && g.grid;
        if (!g.grid) continue;
        REQUIRE(g.rows <= fl::kGridMaxRows);
        REQUIRE(g.cols <= fl::kGridMaxCols);
        std::vector<int> grid;
        for (int r = 0; r < g.rows; ++r)
          for (int c = 0; c < g.cols; ++c) {
            const int row = g.row0 + r * g.row_step, col = g.col0 + c * g.col_step;
            REQUIRE(row < m / 16);
            REQUIRE(col < tile_cols);
            grid.push_back(row * tile_cols + col);
          }
        std::sort(grid.begin(), grid.end());
        CHECK(grid == dealt);
        for (const int t : grid) ++seen[static_cast<size_t>(t)];
      }
      if (all_grids) CHECK(std::all_of(seen.begin(), seen.end(), [](int k) { return k == 1; }));
    }
  }
  // The block programs' products take grids: the score tiles (n 64 and 32) and the head-size
  // ones at 16, 32, 64, 128; 96 and 160 go tile by tile (their tile columns and the 8 warps
  // divide neither way), as does 256 (two tile columns a warp: past the register budget).
  for (const int m : {fl::kRows, fl::kKeyRows})
    for (const int n : {fl::kCols, fl::kKeyRows, 16, 32, 64, 128}) {
      INFO("m " << m << " n " << n);
      for (int w = 0; w < kWarps; ++w) CHECK(fl::warp_grid(w, kWarps, m, n).grid);
    }
  for (const int n : {96, 160, 256}) CHECK_FALSE(fl::warp_grid(0, kWarps, fl::kRows, n).grid);
}
