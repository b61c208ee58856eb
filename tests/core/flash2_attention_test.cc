// The FA2-style attention kernels (core/kernels/flash2_forward.h, flash2_backward.h), their every
// thread run as a fiber by tests/core/simt_emulator.h with the warp shuffles and mma.m16n8k16
// products emulated from mma_fragment.h's layouts: out, the log-sum-exps and dqkv against the CPU
// backend in float64, bf16 and fp16, with and without dropout, ragged sequences; the same bits
// with the warps run one at a time between barriers, the last first (no races on shared
// memory); and the emulator's own
// checks (a product against a plain matrix product, divergent warps and unmatched barriers
// reported).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "attention_check.h"
#include "core/backend.h"
#include "core/kernels/flash2_backward.h"
#include "core/kernels/flash2_forward.h"
#include "kernel_check.h"
#include "simt_emulator.h"

using namespace mtnlg;
using namespace mtnlg::test;
namespace f2 = mtnlg::kernels::flash2;
namespace fl = mtnlg::kernels::flash;
namespace mma = mtnlg::kernels::mma;

namespace {

using Case = AttentionCase;
using Result = AttentionResult;

// f(b, h, block) in a block of its own for every block of every head of every sequence.
template <typename F>
void for_blocks(const fl::Dims& d, int64_t blocks, SimtBlock& block, F&& f) {
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t h = 0; h < d.heads; ++h)
      for (int64_t k = 0; k < blocks; ++k) {
        const std::string err = block.run([&](SimtThread& w) { f(w, b, h, k); });
        REQUIRE(err == "");  // prints the emulator's error
      }
}

// kM: the forward's m tiles a warp (1: 64-row blocks; 2: 128-row blocks of 32-key tiles).
template <typename T, int HD, int kM>
void run_all(const fl::ForwardArgs<T>& fa, const fl::BackwardArgs<T>& ba, bool reverse) {
  const fl::Dims& d = fa.d;
  // The other order: warps one at a time between barriers, the last first.
  const Schedule order = reverse ? Schedule::kWarpSerialReverse : Schedule::kLockstep;
  SimtBlock fwd(f2::kThreads, f2::smem_bytes<T>(HD, kM), order);
  for_blocks(d, f2::forward_blocks(d.s, kM), fwd,
             [&](SimtThread& w, int64_t b, int64_t h, int64_t rb) {
               f2::forward_thread<T, HD, kM>(w, fwd.smem(), fa, b, h, rb);
             });
  SimtBlock bwd(f2::kThreads, f2::backward_smem_bytes<T>(HD), order);
  const int64_t blocks = f2::backward_blocks(d.s);
  if (ba.ds != nullptr) {
    // dS stored, the launcher's order: every prep block (delta, the keep bits), every dk/dv block
    // (dS^T), every dq block.
    SimtBlock prep(f2::kThreads, 0, order),
        dq(f2::kThreads, f2::dq_stored_smem_bytes<T>(HD), order);
    for_blocks(d, blocks, prep, [&](SimtThread& w, int64_t b, int64_t h, int64_t k) {
      f2::prep_thread<T, HD>(w, ba, b, h, k);
    });
    for_blocks(d, blocks, bwd, [&](SimtThread& w, int64_t b, int64_t h, int64_t k) {
      f2::dkv_thread<T, HD>(w, bwd.smem(), ba, b, h, k);
    });
    for_blocks(d, blocks, dq, [&](SimtThread& w, int64_t b, int64_t h, int64_t k) {
      f2::dq_stored_thread<T, HD>(w, dq.smem(), ba, b, h, k);
    });
    return;
  }
  // The kernels' order: every dq block (they write delta), then every dk/dv block.
  for_blocks(d, blocks, bwd, [&](SimtThread& w, int64_t b, int64_t h, int64_t k) {
    f2::dq_thread<T, HD>(w, bwd.smem(), ba, b, h, k);
  });
  for_blocks(d, blocks, bwd, [&](SimtThread& w, int64_t b, int64_t h, int64_t k) {
    f2::dkv_thread<T, HD>(w, bwd.smem(), ba, b, h, k);
  });
}

// kStored: the backward with dS stored (prep, dk/dv storing dS^T, dq from it), else the dq pass
// recomputing it.
template <typename T, int kM = 1, bool kStored = false>
Result run(const Case& c, const Tensor& qkv, const Tensor& dout, double p, RngStream rng,
           bool reverse) {
  Result r{Tensor::cpu({c.b, c.s, c.heads * c.hd}, qkv.dtype()),
           Tensor::cpu({c.b, c.heads, c.s}, DType::kF32), Tensor::cpu(qkv.shape(), qkv.dtype())};
  const fl::Dims d{c.b, c.s, c.heads, c.hd};
  const float scale = attention_score_scale(c.hd);
  const float drop = p > 0 ? kernels::dropout_scale(static_cast<float>(p)) : 1.0f;
  const fl::ForwardArgs<T> fa{qkv.data_as<T>(),
                              r.out.data_as<T>(),
                              r.lse.data_as<float>(),
                              d,
                              scale,
                              static_cast<float>(p),
                              drop,
                              rng};
  std::vector<float> delta(static_cast<size_t>(c.b * c.heads * c.s), NAN);
  // The keep bits start as all ones: a word the first pass does not write shows in dqkv.
  std::vector<uint32_t> keep(static_cast<size_t>(c.b * c.heads * c.s * f2::keep_words(c.s)),
                             0xffffffffu);
  fl::BackwardArgs<T> ba{qkv.data_as<T>(),
                         r.out.data_as<T>(),
                         dout.data_as<T>(),
                         r.lse.data_as<float>(),
                         delta.data(),
                         r.dqkv.data_as<T>(),
                         d,
                         scale,
                         static_cast<float>(p),
                         drop,
                         rng,
                         p > 0 ? keep.data() : nullptr};
  // dS^T starts as NaN (all-ones bits in bf16 and fp16): an element the dq pass reads that the
  // dk/dv pass did not write shows in dq; its padding columns and the slack past the end stay
  // NaN, and must reach no stored row.
  std::vector<T> ds(static_cast<size_t>(f2::ds_bytes(c.b, c.heads, c.s) / 2));
  for (T& x : ds) x.bits = 0xffff;
  if (kStored) {
    ba.ds = ds.data();
    ba.ld_ds = f2::ds_ld(c.s);
  }
  switch (c.hd) {
    case 16:
      run_all<T, 16, kM>(fa, ba, reverse);
      break;
    case 64:
      run_all<T, 64, kM>(fa, ba, reverse);
      break;
    case 128:
      run_all<T, 128, kM>(fa, ba, reverse);
      break;
    case 160:
      run_all<T, 160, kM>(fa, ba, reverse);
      break;
    default:
      FAIL("no instance for head size " << c.hd);
  }
  return r;
}

}  // namespace

TEST_CASE("FA2 forward and backward match the CPU backend in float64 - with and without dropout") {
  const double p = GENERATE(0.0, 0.2);
  // s: one row, a partial tile, exactly one tile, several tiles with a ragged end; the kernels'
  // head sizes 64 and 128, 160 (the 530B recipe's: 20 vectors a row, which 128 threads do not
  // divide, so tile copies cover rows in part), and 16 (the same program, smaller registers)
  // over more tiles.
  const Case c =
      GENERATE(Case{2, 1, 2, 64}, Case{2, 50, 3, 64}, Case{1, 64, 2, 64}, Case{2, 130, 2, 64},
               Case{1, 70, 1, 128}, Case{1, 200, 2, 16}, Case{1, 100, 1, 160});
  check_attention_against_cpu(DType::kBF16, c, p, run<Bf16>);
  check_attention_against_cpu(DType::kF16, c, p, run<F16>);
}

// The forward with two m tiles a warp (128-row blocks of 32-key tiles; MTNLG_CUDA_FLASH2_ROWS=
// 128 on the GPU): the same checks, bf16, the backward continuing from its out and stats. s 130
// and 200: blocks whose second m tile (or whole warps) lie past the sequence.
TEST_CASE("FA2 forward with 128-row blocks matches the CPU backend in float64") {
  const double p = GENERATE(0.0, 0.2);
  const Case c = GENERATE(Case{2, 1, 2, 64}, Case{2, 50, 3, 64}, Case{1, 130, 2, 64},
                          Case{1, 70, 1, 128}, Case{1, 200, 2, 16}, Case{1, 100, 1, 160});
  check_attention_against_cpu(DType::kBF16, c, p, run<Bf16, 2>);
}

// The backward with dS stored (the GPU's default, MTNLG_CUDA_FLASH2_DQ=stored): the same checks
// of dqkv, the forward as above. s 1, 50, 70 and 200: rows of dS^T not a multiple of 8 (padded),
// a last block past the sequence, several key blocks.
TEST_CASE("FA2 backward with dS stored matches the CPU backend in float64") {
  const double p = GENERATE(0.0, 0.2);
  const Case c =
      GENERATE(Case{2, 1, 2, 64}, Case{2, 50, 3, 64}, Case{1, 64, 2, 64}, Case{2, 130, 2, 64},
               Case{1, 70, 1, 128}, Case{1, 200, 2, 16}, Case{1, 100, 1, 160});
  check_attention_against_cpu(DType::kBF16, c, p, run<Bf16, 1, true>);
  check_attention_against_cpu(DType::kF16, c, p, run<F16, 1, true>);
}

// The keep bits of the stored-dS backward's first pass are the recomputing dq pass's, word for
// word (the dk/dv pass reads them either way), and delta agrees within fp32 sums in another
// order.
TEST_CASE("FA2 prep pass writes the dq pass's keep bits and delta") {
  for (const int64_t s : {int64_t{50}, int64_t{130}, int64_t{67}}) {
    INFO("s " << s);
    const Case c{2, s, 2, 64};
    const double p = 0.2;
    const RngStream rng{42, 3, 2};
    const Tensor qkv = random_tensor({c.b, c.s, c.heads * 3 * c.hd}, DType::kBF16, 1, -2.0, 2.0);
    const Tensor dout = random_tensor({c.b, c.s, c.heads * c.hd}, DType::kBF16, 2);
    const Tensor out = random_tensor({c.b, c.s, c.heads * c.hd}, DType::kBF16, 3);
    const Tensor lse = random_tensor({c.b, c.heads, c.s}, DType::kF32, 4);
    const fl::Dims d{c.b, c.s, c.heads, c.hd};
    const size_t rows = static_cast<size_t>(c.b * c.heads * c.s);
    std::vector<std::vector<float>> delta(2, std::vector<float>(rows, NAN));
    std::vector<std::vector<uint32_t>> keep(
        2, std::vector<uint32_t>(rows * static_cast<size_t>(f2::keep_words(c.s)), 0xdeadbeefu));
    Tensor dq = Tensor::cpu(qkv.shape(), DType::kBF16);
    for (int pass = 0; pass < 2; ++pass) {
      fl::BackwardArgs<Bf16> a{qkv.data_as<Bf16>(),
                               out.data_as<Bf16>(),
                               dout.data_as<Bf16>(),
                               lse.data_as<float>(),
                               delta[static_cast<size_t>(pass)].data(),
                               dq.data_as<Bf16>(),
                               d,
                               0.125f,
                               static_cast<float>(p),
                               1.25f,
                               rng,
                               keep[static_cast<size_t>(pass)].data()};
      SimtBlock block(f2::kThreads, f2::backward_smem_bytes<Bf16>(64), Schedule::kLockstep);
      for_blocks(d, f2::backward_blocks(c.s), block,
                 [&](SimtThread& w, int64_t b, int64_t h, int64_t k) {
                   if (pass == 0)
                     f2::dq_thread<Bf16, 64>(w, block.smem(), a, b, h, k);
                   else
                     f2::prep_thread<Bf16, 64>(w, a, b, h, k);
                 });
    }
    CHECK(keep[0] == keep[1]);
    for (size_t i = 0; i < rows; ++i)
      CHECK(std::abs(delta[0][i] - delta[1][i]) <= 1e-5f * (1.0f + std::abs(delta[0][i])));
  }
}

TEST_CASE("FA2 kernels' shared memory and head sizes") {
  // Q and two buffers of K and V: 64 + 4 x 64 rows of hd + 8 two-byte elements, 45 KiB at head
  // size 64, 85 KiB at 128 (A100: 163 KiB a block).
  CHECK(f2::smem_bytes<Bf16>(64) == 320 * 72 * 2);
  CHECK(f2::smem_bytes<Bf16>(128) == 320 * 136 * 2);
  // 128-row blocks: Q 128 rows, two buffers of 32-row K and V tiles; 70 KiB at 128.
  CHECK(f2::smem_bytes<Bf16>(128, 2) == 256 * 136 * 2);
  CHECK(f2::forward_blocks(2048, 1) == 32);
  CHECK(f2::forward_blocks(2048, 2) == 16);
  CHECK(f2::forward_blocks(130, 2) == 2);
  // Backward: two 64-row blocks, two buffers of two 32-row tiles, 64 floats and 64 keep
  // words; 69 KiB at head size 128.
  CHECK(f2::backward_smem_bytes<Bf16>(128) == 256 * 136 * 2 + 256 + 256);
  // The stored-dS dq pass: two buffers of a 64-row dS^T tile (64 + 8 columns) and K tile; 52 KiB
  // at head size 128. Its scratch: dS^T rows padded to 8, 64 elements of slack, after delta and
  // the keep bits rounded up to 16 bytes.
  CHECK(f2::dq_stored_smem_bytes<Bf16>(128) == 128 * (72 + 136) * 2);
  CHECK(f2::ds_ld(67) == 72);
  CHECK(f2::ds_ld(2048) == 2048);
  CHECK(f2::ds_bytes(4, 16, 2048) == (4 * 16 * 2048 * 2048 + 64) * 2);
  CHECK(f2::ds_offset(1, 1, 3, false) == 16);
  CHECK(f2::backward_scratch_bytes(1, 1, 3, true, true) == 32 + (3 * 8 + 64) * 2);
  CHECK(f2::head_dim_supported(64));
  CHECK(f2::head_dim_supported(128));
  CHECK(f2::head_dim_supported(160));  // the 530B recipe's
  CHECK_FALSE(f2::head_dim_supported(96));
  // Head size 160: the forward's Q and K/V buffers 105 KiB, the backward 86.5 KiB, the stored-dS
  // dq 60 KiB: under an A100's 163 KiB a block.
  CHECK(f2::smem_bytes<Bf16>(160) == 320 * 168 * 2);
  CHECK(f2::backward_smem_bytes<Bf16>(160) == 256 * 168 * 2 + 256 + 256);
  CHECK(f2::dq_stored_smem_bytes<Bf16>(160) == 128 * (72 + 168) * 2);
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
    SimtBlock block(32, 0, Schedule::kLockstep);
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
    REQUIRE(err == "");            // prints the emulator's error
    CHECK(block.products() == 1);  // one warp, one product
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 8; ++j) {
        float want = c[i][j];
        for (int k = 0; k < 16; ++k) want += a[i][k] * b[k][j];
        CHECK(got[static_cast<size_t>(i * 8 + j)] == want);
      }
  }
  // The layout functions against the PTX ISA's formulas for mma.m16n8k16 with .f16/.bf16
  // operands and .f32 accumulators, as the ISA states them (element i of a lane, low to high).
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane >> 2, tig = lane % 4;
    for (int i = 0; i < 8; ++i) {
      const int row = (i < 2 || (4 <= i && i < 6)) ? group : group + 8;
      const int col = i < 4 ? tig * 2 + (i & 1) : tig * 2 + (i & 1) + 8;
      CHECK(mma::a_element(lane, i).row == row);
      CHECK(mma::a_element(lane, i).col == col);
    }
    for (int i = 0; i < 4; ++i) {
      CHECK(mma::b_element(lane, i).row == (i < 2 ? tig * 2 + (i & 1) : tig * 2 + (i & 1) + 8));
      CHECK(mma::b_element(lane, i).col == group);
      CHECK(mma::c_element(lane, i).row == (i < 2 ? group : group + 8));
      CHECK(mma::c_element(lane, i).col == tig * 2 + (i & 1));
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

TEST_CASE(
    "the SIMT emulator reports divergent warps and unmatched barriers - its schedules differ") {
  SimtBlock block(64, 0, Schedule::kLockstep);
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
  // A race: warp 1 writes what warp 0 reads, with no barrier between. Lockstep runs warp 0's
  // read first; one warp at a time, the last first, runs warp 1's write first.
  const auto racy = [](Schedule order) {
    SimtBlock b(64, sizeof(int), order);
    int seen = -1;
    REQUIRE(b.run([&](SimtThread& w) {
               int* flag = reinterpret_cast<int*>(b.smem());
               if (w.thread() == 0) *flag = 0;
               w.sync();
               if (w.thread() == 32) *flag = 1;
               if (w.thread() == 0) seen = *flag;
             }).empty());
    return seen;
  };
  CHECK(racy(Schedule::kLockstep) == 0);
  CHECK(racy(Schedule::kWarpSerialReverse) == 1);
  // One warp at a barrier the other never reaches.
  CHECK_THAT(block.run([&](SimtThread& w) {
    if (w.thread() < 32) w.sync();
  }),
             Catch::Contains("no progress"));
}
