// Causal attention forward, FlashAttention-2 style (Dao 2023): each warp owns 16 query rows (or
// two 16-row m tiles, forward_thread's kM) and keeps everything about them in registers across
// the key tiles: Q's fragments (kM 1), the scores of one 64-key tile (32 with kM 2), the running
// maximum and sum, and O. Only K and V (and with kM 2 Q) pass through shared memory.
// The scores come out of one mma.m16n8k16 in the layout the next one takes as its A operand
// (core/kernels/mma_fragment.h), so the probabilities go from the Q K^T product to the P V
// product without leaving the registers, and a row's maximum and sum need only the four lanes
// that share it (two shuffles).
//
// Contract (core/kernels/flash_common.h): out, and stats as each row's log-sum-exp of its scaled
// scores, so any backward (the blocked kernels', the CPU's) continues from it; dropout keeps the
// same elements (the CPU's index). One thread's program, written once for two executors. W
// provides:
//   w.thread()            this thread's index in the block, [0, kThreads); lane = thread % 32
//   w.sync()              a barrier of the block (__syncthreads)
//   w.shfl_xor(v, mask)   v of lane (lane ^ mask) of the same warp (__shfl_xor_sync)
//   w.mma<T>(c, a, b)     c += A B, one mma.sync.m16n8k16 of the warp: c float[4], a uint32[4],
//                         b uint32[2] in mma_fragment.h's layouts, T bf16 or fp16
//   w.ldmatrix<kTrans>(r, row)   ldmatrix.sync.m8n8.x{1,2,4}[.trans].b16 of the warp: r uint32[n]
//                         for n matrices, row this lane's row address in shared memory
//   w.cp_async16(dst, src)   this thread's asynchronous 16-byte copy, global to shared
//   w.cp_async_commit()   closes this thread's group of copies issued since the last
//   w.cp_async_wait<N>()  waits until at most N of this thread's groups are still in flight
// All control flow that reaches sync is uniform across the block, and that reaching shfl_xor and
// mma uniform across the warp (the emulator, tests/core/simt_emulator.h, fails otherwise).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/hostdevice.h"
#include "core/kernels/dropout_math.h"
#include "core/kernels/flash_common.h"
#include "core/kernels/mma_fragment.h"

namespace mtnlg::kernels::flash2 {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 16 * kWarps;  // query rows of a block with one m tile a warp
constexpr int kCols = 64;           // keys of a tile (forward_cols: with one m tile a warp)
static_assert(kRows == flash::kRows, "the query blocks of flash_common.h");

// Head sizes with a kernel (each is a template instance: its register arrays are sized by it).
MTNLG_HD bool head_dim_supported(int64_t hd) {
  return hd == 64 || hd == 128 || hd == 160;
}
// The head sizes the kernels have been measured at on a GPU, and faster than the blocked kernels
// there: the default takes the FA2-style kernels at these only; 160 (the 530B recipe's), checked
// by the emulator and not yet timed, when MTNLG_CUDA_ATTENTION names flash2 (attention_choice).
MTNLG_HD bool head_dim_measured(int64_t hd) {
  return hd == 64 || hd == 128;
}

// Query rows of a forward block whose warps own kM 16-row m tiles each (forward_thread), and the
// keys of its K/V tiles: 64, or 32 with two m tiles, whose scores and O then fill the registers
// (FlashAttention-2's 128 x 32 tiles at head size 128 with dropout).
MTNLG_HD constexpr int forward_rows(int kM) {
  return kRows * kM;
}
MTNLG_HD constexpr int forward_cols(int kM) {
  return kM == 1 ? kCols : kCols / 2;
}
MTNLG_HD int64_t forward_blocks(int64_t s, int kM) {
  return (s + forward_rows(kM) - 1) / forward_rows(kM);
}

// The Q tile [forward_rows(kM)][hd + 8] and two buffers of K and V tiles, each [64][hd + 8]:
// the padding puts consecutive rows 16 bytes apart in the banks, so the fragment loads of a
// warp (8 rows x 4 pairs) hit 32 different banks. 87 KiB at head size 128 (70 KiB with kM 2).
template <typename T>
MTNLG_HD size_t smem_bytes(int64_t hd, int kM = 1) {
  return static_cast<size_t>(forward_rows(kM) + 4 * forward_cols(kM)) *
         static_cast<size_t>(hd + 8) * sizeof(T);
}

// Thread `tid`'s share of loading rows [row0, row0 + kTileRows) of a [s, HD] operand into a
// tile with leading dimension HD + 8; rows past s are zero.
template <typename T, int HD, int kTileRows>
MTNLG_HD void load_tile(int tid, T* dst, const T* src, int64_t ld_src, int64_t row0, int64_t s) {
  constexpr int kVecs = HD / 8;  // 16-byte vectors a row
  for (int e = tid; e < kTileRows * kVecs; e += kThreads) {
    const int r = e / kVecs, c = (e % kVecs) * 8;
    const int64_t i = row0 + r;
    if (i < s)
      flash::copy16(dst + r * (HD + 8) + c, src + i * ld_src + c);
    else
      flash::zero16(dst + r * (HD + 8) + c);
  }
}

// load_tile's rows by asynchronous copies (cp.async, 16 bytes each): the caller commits them as
// a group and waits for it before a barrier makes the tile everyone's. Rows past s are zeroed
// by plain stores. The same vectors to the same threads as load_tile (vector e to thread e %
// kThreads). This runs for every K/V tile, in the loop the products are in, so its addressing is
// kept to a pointer step a copy: the thread's first source address is one 64-bit product a
// call, each later pass adds a fixed stride, and the rows inside the sequence are counted once
// into an int (32-bit comparisons). Worked out per copy, as it was, the SASS spent about a dozen
// instructions on each of forward's 16 copies a tile (64-bit products and comparisons, the
// operand's base reloaded from the parameters): as many as the tile's products and loads.
template <typename T, int HD, int kTileRows, typename W>
MTNLG_HD void load_tile_async_whole_rows(W& w, int tid, T* dst, const T* src, int64_t ld_src,
                                         int64_t row0, int64_t s) {
  constexpr int kVecs = HD / 8;  // 16-byte vectors a row
  static_assert(kThreads % kVecs == 0, "every pass of the block covers whole rows");
  constexpr int kPassRows = kThreads / kVecs;  // rows one pass of the block covers
  constexpr int kPasses = (kTileRows + kPassRows - 1) / kPassRows;
  const int r0 = tid / kVecs, c = (tid % kVecs) * 8;
  // Rows of the tile inside the sequence, 0 to kTileRows.
  const int64_t left = s - row0;
  const int inside = left <= 0 ? 0 : left < kTileRows ? static_cast<int>(left) : kTileRows;
  const int64_t step = kPassRows * ld_src;
  T* to = dst + r0 * (HD + 8) + c;
  if (r0 >= inside) {  // no row of this thread's is inside: zeros only (a tail tile)
    MTNLG_UNROLL
    for (int k = 0; k < kPasses; ++k) {
      if (kTileRows % kPassRows != 0 && r0 + k * kPassRows >= kTileRows) break;
      flash::zero16(to + k * kPassRows * (HD + 8));
    }
    return;
  }
  const T* from = src + (row0 + r0) * ld_src + c;           // inside the sequence: r0 < inside
  if (kTileRows % kPassRows == 0 && inside == kTileRows) {  // every tile but the last
    MTNLG_UNROLL
    for (int k = 0; k < kPasses; ++k) {
      w.cp_async16(to + k * kPassRows * (HD + 8), from);
      if (k + 1 < kPasses) from += step;
    }
    return;
  }
  MTNLG_UNROLL
  for (int k = 0; k < kPasses; ++k) {
    const int r = r0 + k * kPassRows;
    if (kTileRows % kPassRows != 0 && r >= kTileRows) break;  // a partial last pass
    if (r < inside)
      w.cp_async16(to, from);
    else
      flash::zero16(to);
    to += kPassRows * (HD + 8);
    if (k + 1 < kPasses && r + kPassRows < inside) from += step;  // never past the last row
  }
}

// load_tile_async for any head size: where a row's vectors do not divide the block's threads
// (head size 160: 20 vectors a row, 128 threads), a pass of the block covers no whole number of
// rows, so each thread walks vectors tid, tid + kThreads, ... of the tile as load_tile does, a
// division by a constant (a multiply and shift) a copy; otherwise the whole-row version above.
template <typename T, int HD, int kTileRows, typename W>
MTNLG_HD void load_tile_async(W& w, int tid, T* dst, const T* src, int64_t ld_src, int64_t row0,
                              int64_t s) {
  constexpr int kVecs = HD / 8;
  if constexpr (kThreads % kVecs == 0) {
    load_tile_async_whole_rows<T, HD, kTileRows>(w, tid, dst, src, ld_src, row0, s);
  } else {
    const int64_t left = s - row0;
    const int inside = left <= 0 ? 0 : left < kTileRows ? static_cast<int>(left) : kTileRows;
    MTNLG_UNROLL
    for (int e = tid; e < kTileRows * kVecs; e += kThreads) {
      const int r = e / kVecs, c = (e % kVecs) * 8;
      T* to = dst + r * (HD + 8) + c;
      if (r < inside)
        w.cp_async16(to, src + (row0 + r) * ld_src + c);
      else
        flash::zero16(to);
    }
  }
}

// The double-buffered pipeline's step into tile `it` (tiles alternate between buffers 0 and 1):
// starts fetching the next tile, at `next`, into the other buffer if there is one (`next` <
// `end`), waits for this tile's copies, and ends with a barrier after which the tile is
// everyone's. Returns this tile's buffer. The caller ends each tile with a barrier too, so that
// no warp still reads a buffer when the next step refills it.
template <typename W, typename Fetch>
MTNLG_HD int begin_tile(W& w, int64_t it, int64_t next, int64_t end, Fetch&& fetch) {
  const int buf = static_cast<int>(it & 1);
  if (next < end) {
    fetch(next, buf ^ 1);
    w.template cp_async_wait<1>();
  } else {
    w.template cp_async_wait<0>();
  }
  w.sync();
  return buf;
}

// One pipeline stage's copies: rows [row0, row0 + kTileRows) of operands x and y into the tiles
// dst and dst + kTileRows * (HD + 8), asynchronously, committed as one group.
template <typename T, int HD, int kTileRows, typename W>
MTNLG_HD void fetch_tiles(W& w, int tid, T* dst, const T* x, int64_t ld_x, const T* y, int64_t ld_y,
                          int64_t row0, int64_t s) {
  load_tile_async<T, HD, kTileRows>(w, tid, dst, x, ld_x, row0, s);
  load_tile_async<T, HD, kTileRows>(w, tid, dst + kTileRows * (HD + 8), y, ld_y, row0, s);
  w.cp_async_commit();
}

// 2^x, one instruction on the GPU (ex2.approx.ftz: relative error about 2^-22, results below
// 2^-126 flushed to 0; exp2(-inf) = 0). The kernels' softmax works in base 2, the scores scaled by
// log2(e) once, as FlashAttention does: expf is about a dozen instructions and, where the
// argument could be -inf, a branch, for every score.
MTNLG_HD float fast_exp2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  return std::exp2(x);
#endif
}

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <typename T>
MTNLG_HD uint32_t pack_floats(float lo, float hi) {
  return mma::pack(T(lo).bits, T(hi).bits);
}

// The dropout keep decisions of this lane's four scores of an 8-key tile (keys a multiple of 8
// within the row), bit e for mma::c_element(lane, e): the same as KeepMask's for each element
// (the CPU's index). n0 and n1 are the element indices (flash::drop_index, without the stream's
// offset) of the lane's first key of the tile in its first and second row; `threshold` is
// dropout_threshold(p) (an integer comparison a decision). A Philox block holds the draws of
// four consecutive keys, and the two lanes of a quad that hold a block's keys (lanes 4g + 2k and
// 4g + 2k + 1: keys 4k to 4k + 3) need it for both of their rows; so each draws one, the even
// lane its first row's, the odd lane its second's, and each passes the other the two words it
// needs: one block per four scores, where a KeepMask per row drew one per two. A row's draws
// start at a block boundary only when s is a multiple of 4; otherwise each lane draws its own
// (warp-uniform either way: the shuffles need every lane).
template <typename W, typename Args>
MTNLG_HD uint32_t keep_bits(W& w, const Args& a, uint64_t n0, uint64_t n1, uint32_t threshold,
                            int lane) {
  if (a.d.s % 4 != 0) {
    KeepMask first(a.rng, a.dropout_p), second(a.rng, a.dropout_p);
    return static_cast<uint32_t>(first.keep(n0)) | static_cast<uint32_t>(first.keep(n0 + 1)) << 1 |
           static_cast<uint32_t>(second.keep(n1)) << 2 |
           static_cast<uint32_t>(second.keep(n1 + 1)) << 3;
  }
  const bool odd = (lane & 1) != 0;
  const uint64_t n = a.rng.offset + (odd ? n1 : n0);
  const Philox4 r = philox4x32_10(a.rng.seed, stream_word(a.rng), n >> 2);
  // Even lane: keys 4k, 4k + 1 (words 0 and 1); odd lane: keys 4k + 2, 4k + 3 (words 2 and 3).
  const uint32_t x0 = w.shfl_xor(odd ? r.v[0] : r.v[2], 1);
  const uint32_t x1 = w.shfl_xor(odd ? r.v[1] : r.v[3], 1);
  const uint32_t first0 = odd ? x0 : r.v[0], first1 = odd ? x1 : r.v[1];
  const uint32_t second0 = odd ? r.v[2] : x0, second1 = odd ? r.v[3] : x1;
  return static_cast<uint32_t>(first0 >= threshold) |
         static_cast<uint32_t>(first1 >= threshold) << 1 |
         static_cast<uint32_t>(second0 >= threshold) << 2 |
         static_cast<uint32_t>(second1 >= threshold) << 3;
}

// The larger of two scores (finite or -inf): one instruction on the GPU (FMNMX), where a > b ? a
// : b is a comparison and a select. Only NaN (never a score here) and the sign of a zero max
// would tell them apart, and neither changes an exp2(x - max).
MTNLG_HD float max2(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fmaxf(a, b);
#else
  return std::fmax(a, b);
#endif
}

// The last key of this tile's (from key c0, kTileCols keys) that row i sees, as an offset in the
// tile: -1 when it sees none (i before c0, or i past the sequence), kTileCols - 1 when all. Key
// c0 + j is visible to row i (causal: c0 + j <= i < s) exactly when j <= it: one 32-bit
// comparison a score instead of 64-bit ones.
template <int kTileCols>
MTNLG_HD int last_visible(int64_t i, int64_t c0, int64_t s) {
  if (i >= s) return -1;
  const int64_t rel = i - c0;
  return rel < 0 ? -1 : rel >= kTileCols ? kTileCols - 1 : static_cast<int>(rel);
}

// Fragments from shared memory by ldmatrix (m8n8, 16-bit): each lane gives the address of one
// 8-element row of one of the 8 x 8 matrices (lanes 8m to 8m + 7 the rows of matrix m) and
// receives, of matrix m in register m, row lane / 4's elements 2 (lane % 4) and 2 (lane % 4) + 1,
// or with .trans column lane / 4's. Rows are 16-byte aligned: the tiles' leading dimension is a
// multiple of 8 elements and every fragment starts at a multiple of 8 columns.
//
// The A fragment of rows [row0, row0 + 16) and columns [col0, col0 + 16) of a row-major tile:
// matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) are its four registers.
template <typename T, typename W>
MTNLG_HD void load_a(W& w, uint32_t (&frag)[4], const T* tile, int ld, int row0, int col0,
                     int lane) {
  const T* row = tile + (row0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + col0 + (lane >> 4) * 8;
  w.template ldmatrix<false>(frag, row);
}

// The A fragment of rows [m0, m0 + 16) and columns [k0, k0 + 16) of A = X^T, X a row-major tile
// holding A's columns as its rows (X[k][m]): load_a's four matrices, each read transposed from
// rows k0.. (and k0 + 8..) of X.
template <typename T, typename W>
MTNLG_HD void load_a_trans(W& w, uint32_t (&frag)[4], const T* tile, int ld, int m0, int k0,
                           int lane) {
  const int m = lane >> 3;  // the matrix this lane addresses a row of
  const T* row = tile + (k0 + (lane & 7) + (m >> 1) * 8) * ld + m0 + (m & 1) * 8;
  w.template ldmatrix<true>(frag, row);
}

// The B fragment B(k, n) = X[n0 + n][k0 + k] of a row-major tile X (its pairs run along X's
// rows): matrices (rows n0.., cols k0..) and (rows n0.., cols k0 + 8..).
template <typename T, typename W>
MTNLG_HD void load_b_rows(W& w, uint32_t (&frag)[2], const T* tile, int ld, int n0, int k0,
                          int lane) {
  const T* row = tile + (n0 + (lane & 7)) * ld + k0 + ((lane >> 3) & 1) * 8;
  w.template ldmatrix<false>(frag, row);
}

// The B fragment B(k, n) = X[k0 + k][n0 + n] (its pairs run down X's columns): matrices (rows
// k0.., cols n0..) and (rows k0 + 8.., cols n0..), transposed.
template <typename T, typename W>
MTNLG_HD void load_b_cols(W& w, uint32_t (&frag)[2], const T* tile, int ld, int k0, int n0,
                          int lane) {
  const T* row = tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + n0;
  w.template ldmatrix<true>(frag, row);
}

// load_b_cols for the two n tiles n0 and n0 + 8 at once (ldmatrix .x4 .trans): frag[0..1] is n
// tile n0's fragment, frag[2..3] n0 + 8's.
template <typename T, typename W>
MTNLG_HD void load_b_cols2(W& w, uint32_t (&frag)[4], const T* tile, int ld, int k0, int n0,
                           int lane) {
  const T* row = tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + n0 + (lane >> 4) * 8;
  w.template ldmatrix<true>(frag, row);
}

// Forward for query rows [rb * kBlockRows, + kBlockRows) of head h of sequence b, kBlockRows =
// forward_rows(kM): each warp owns kM consecutive 16-row m tiles. smem holds smem_bytes<T>(HD,
// kM). With kM = 1 Q's fragments stay in registers for the whole block; with kM = 2 they come
// from shared memory at every k step (registers hold the two tiles' scores and O instead), and
// each K or V fragment a warp loads serves both tiles' products: half the fragment loads, the
// copies and the barriers per product, and each K/V tile fetched once per 128 query rows
// instead of per 64 (FlashAttention-2's own 128-row blocks of four warps).
template <typename T, int HD, int kM = 1, typename W>
MTNLG_HD void forward_thread(W& w, char* smem, const flash::ForwardArgs<T>& a, int64_t b, int64_t h,
                             int64_t rb) {
  static_assert(HD % 16 == 0, "head size a multiple of 16");
  static_assert(kM == 1 || kM == 2, "one or two m tiles a warp");
  constexpr int ld = HD + 8;
  constexpr int kBlockRows = forward_rows(kM);
  constexpr int kKeys = forward_cols(kM);  // keys of a K/V tile
  constexpr int kSteps = HD / 16;          // k steps of Q K^T
  constexpr int kOTiles = HD / 8;          // 8-column tiles of O
  constexpr int kSTiles = kKeys / 8;       // 8-key tiles of the scores
  constexpr int kPSteps = kKeys / 16;      // k steps of P V
  constexpr bool kQInRegisters = kM == 1;
  T* sq = reinterpret_cast<T*>(smem);
  // Two buffers of K then V, by arithmetic (an indexed array of pointers would sit in local
  // memory).
  const auto kv = [&](int buf) { return sq + (kBlockRows + buf * 2 * kKeys) * ld; };
  const flash::Dims d = a.d;
  const int64_t s = d.s, ldq = d.ldq(), r0 = rb * kBlockRows;
  const T* base = a.qkv + b * s * ldq + h * 3 * d.hd;
  const int tid = w.thread(), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wr = warp * 16 * kM;  // the warp's first row in the block
  // This thread's two rows of each m tile, and each tile's first and last row.
  int64_t rows[kM][2], first_row[kM], last_row[kM];
  MTNLG_UNROLL
  for (int mi = 0; mi < kM; ++mi) {
    first_row[mi] = r0 + wr + 16 * mi;
    last_row[mi] = first_row[mi] + 15;
    rows[mi][0] = first_row[mi] + g;
    rows[mi][1] = first_row[mi] + g + 8;
  }
  const int64_t warp_last = last_row[kM - 1];
  const float neg_inf = -INFINITY;
  const float scale2 = a.scale * kLog2e;

  // Key tiles in flight one ahead of the products: tile c0 + 64 is copied into one buffer while
  // the warps multiply by the other (cp.async groups, one a tile).
  const int64_t end = r0 + kBlockRows < s ? r0 + kBlockRows : s;  // keys the block's rows see
  const auto fetch = [&](int64_t c0, int buf) {
    fetch_tiles<T, HD, kKeys>(w, tid, kv(buf), base + d.hd, ldq, base + 2 * d.hd, ldq, c0, s);
  };
  fetch(0, 0);
  load_tile<T, HD, kBlockRows>(tid, sq, base, ldq, r0, s);
  w.sync();
  [[maybe_unused]] uint32_t qa[kQInRegisters ? kSteps : 1][4];
  if constexpr (kQInRegisters) {
    MTNLG_UNROLL
    for (int kk = 0; kk < kSteps; ++kk) load_a(w, qa[kk], sq, ld, wr, kk * 16, lane);
  }

  float o[kM][kOTiles][4];
  float m[kM][2], l[kM][2];  // l: this thread's share of the row sums (its 16 keys of each tile)
  MTNLG_UNROLL
  for (int mi = 0; mi < kM; ++mi) {
    MTNLG_UNROLL
    for (int j = 0; j < kOTiles; ++j) {
      MTNLG_UNROLL
      for (int e = 0; e < 4; ++e) o[mi][j][e] = 0.0f;
    }
    m[mi][0] = m[mi][1] = neg_inf;
    l[mi][0] = l[mi][1] = 0.0f;
  }
  const bool dropout = a.dropout_p > 0.0f;
  // The element indices of key 2t of the thread's rows (keep_bits), and the decision's integer
  // threshold: worked out once, each tile's keys then an addition.
  uint64_t drop[kM][2];
  MTNLG_UNROLL
  for (int mi = 0; mi < kM; ++mi) {
    drop[mi][0] = flash::drop_index(d, b, h, rows[mi][0], 2 * t);
    drop[mi][1] = flash::drop_index(d, b, h, rows[mi][1], 2 * t);
  }
  const uint32_t keep_threshold = dropout_threshold(a.dropout_p);

  for (int64_t c0 = 0, it = 0; c0 < end; c0 += kKeys, ++it) {
    const int buf = begin_tile(w, it, c0 + kKeys, end, fetch);
    const T* sk = kv(buf);
    const T* sv = kv(buf) + kKeys * ld;

    // Scores of the warp's rows against the tile's keys, the k step outside: the products of a
    // k step are independent and pipeline, where a key tile's k steps in a row would each wait
    // for the last (an mma.sync's latency is several times its issue interval). Only a tile
    // that reaches past the first m tile's last row skips 8-key tiles wholly past a tile's
    // rows, in its own copy of the loop, so that the others have no branch between products.
    float sc[kM][kSTiles][4];
    MTNLG_UNROLL
    for (int mi = 0; mi < kM; ++mi) {
      MTNLG_UNROLL
      for (int nt = 0; nt < kSTiles; ++nt) {
        MTNLG_UNROLL
        for (int e = 0; e < 4; ++e) sc[mi][nt][e] = 0.0f;
      }
    }
    const auto scores = [&](auto guarded) {
      MTNLG_UNROLL
      for (int kk = 0; kk < kSteps; ++kk) {
        [[maybe_unused]] uint32_t qf[kQInRegisters ? 1 : kM][4];
        if constexpr (!kQInRegisters) {
          MTNLG_UNROLL
          for (int mi = 0; mi < kM; ++mi) load_a(w, qf[mi], sq, ld, wr + 16 * mi, kk * 16, lane);
        }
        MTNLG_UNROLL
        for (int nt = 0; nt < kSTiles; ++nt) {
          if (decltype(guarded)::value && c0 + nt * 8 > warp_last) continue;  // warp-uniform
          uint32_t kb[2];                                                     // B(k, n) = K[n][k]
          load_b_rows(w, kb, sk, ld, nt * 8, kk * 16, lane);
          MTNLG_UNROLL
          for (int mi = 0; mi < kM; ++mi) {
            if (decltype(guarded)::value && c0 + nt * 8 > last_row[mi]) continue;
            if constexpr (kQInRegisters)
              w.template mma<T>(sc[mi][nt], qa[kk], kb);
            else
              w.template mma<T>(sc[mi][nt], qf[mi], kb);
          }
        }
      }
    };
    if (c0 + kKeys - 1 <= last_row[0])
      scores(std::false_type{});
    else
      scores(std::true_type{});

    float alpha[kM][2];
    MTNLG_UNROLL
    for (int mi = 0; mi < kM; ++mi) {
      // Scale (base 2) and mask; each row's new maximum over its four lanes. A tile every row
      // of the m tile sees whole (all but the diagonal's and the sequence's last, warp-uniform)
      // runs without the mask, in its own copy of the loop; the others compare each key's
      // offset in the tile with the last one its row sees.
      float mx[2] = {m[mi][0], m[mi][1]};
      const auto scale_scores = [&](auto masked) {
        int last[2] = {kKeys - 1, kKeys - 1};
        if (decltype(masked)::value) {
          last[0] = last_visible<kKeys>(rows[mi][0], c0, s);
          last[1] = last_visible<kKeys>(rows[mi][1], c0, s);
        }
        MTNLG_UNROLL
        for (int nt = 0; nt < kSTiles; ++nt) {
          MTNLG_UNROLL
          for (int e = 0; e < 4; ++e) {
            const int r = e >> 1;
            float x = sc[mi][nt][e] * scale2;
            if (decltype(masked)::value && nt * 8 + mma::c_element(lane, e).col > last[r])
              x = neg_inf;
            sc[mi][nt][e] = x;
            mx[r] = max2(mx[r], x);
          }
        }
      };
      if (last_row[mi] < s && c0 + kKeys - 1 <= first_row[mi])
        scale_scores(std::false_type{});
      else
        scale_scores(std::true_type{});
      // m_use: the maximum the exponents subtract, 0 while a row has seen no key (its scores
      // are all -inf, and exp2(-inf - 0) = 0 where -inf - -inf would be NaN).
      float m_use[2];
      MTNLG_UNROLL
      for (int r = 0; r < 2; ++r) {
        mx[r] = max2(mx[r], w.shfl_xor(mx[r], 1));
        mx[r] = max2(mx[r], w.shfl_xor(mx[r], 2));
        m_use[r] = mx[r] == neg_inf ? 0.0f : mx[r];
        alpha[mi][r] = fast_exp2(m[mi][r] - m_use[r]);  // 0 from m = -inf
        m[mi][r] = mx[r];
        l[mi][r] *= alpha[mi][r];
      }
      // Probabilities against the new maximum (the sum undropped); in place, dropped ones
      // zeroed and kept ones scaled, for the product with V.
      MTNLG_UNROLL
      for (int nt = 0; nt < kSTiles; ++nt) {
        // Tiles wholly past the m tile's last row draw nothing (warp-uniform): all their p are 0.
        const uint32_t keep = dropout && c0 + nt * 8 <= last_row[mi]
                                  ? keep_bits(w, a, drop[mi][0] + c0 + nt * 8,
                                              drop[mi][1] + c0 + nt * 8, keep_threshold, lane)
                                  : 0u;
        MTNLG_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          const float p = fast_exp2(sc[mi][nt][e] - m_use[r]);  // 0 where masked
          l[mi][r] += p;
          // Dropout: scaled when kept, 0 when dropped, p itself without dropout.
          sc[mi][nt][e] = !dropout ? p : (keep >> e) & 1u ? p * a.drop_scale : 0.0f;
        }
      }
    }
    MTNLG_UNROLL
    for (int mi = 0; mi < kM; ++mi) {
      MTNLG_UNROLL
      for (int j = 0; j < kOTiles; ++j) {
        MTNLG_UNROLL
        for (int e = 0; e < 4; ++e) o[mi][j][e] *= alpha[mi][e >> 1];
      }
    }
    // O += P V: two score tiles side by side are one A fragment (mma_fragment.h); each V
    // fragment serves every m tile.
    MTNLG_UNROLL
    for (int kk = 0; kk < kPSteps; ++kk) {
      if (c0 + kk * 16 > warp_last) continue;  // all masked (warp-uniform)
      uint32_t pa[kM][4];
      MTNLG_UNROLL
      for (int mi = 0; mi < kM; ++mi) {
        pa[mi][0] = pack_floats<T>(sc[mi][2 * kk][0], sc[mi][2 * kk][1]);
        pa[mi][1] = pack_floats<T>(sc[mi][2 * kk][2], sc[mi][2 * kk][3]);
        pa[mi][2] = pack_floats<T>(sc[mi][2 * kk + 1][0], sc[mi][2 * kk + 1][1]);
        pa[mi][3] = pack_floats<T>(sc[mi][2 * kk + 1][2], sc[mi][2 * kk + 1][3]);
      }
      MTNLG_UNROLL
      for (int j = 0; j < kOTiles; ++j) {
        uint32_t vb[2];  // B(k, n) = V[k][n]
        load_b_cols(w, vb, sv, ld, kk * 16, j * 8, lane);
        MTNLG_UNROLL
        for (int mi = 0; mi < kM; ++mi) {
          if (c0 + kk * 16 > last_row[mi]) continue;  // all masked (warp-uniform)
          w.template mma<T>(o[mi][j], pa[mi], vb);
        }
      }
    }
    w.sync();  // every warp is done with this buffer before the next fetch refills it
  }

  // Each row's sum over its four lanes; out = O / l and the log-sum-exp, rows inside the sequence.
  T* out = a.out + b * s * d.ldo() + h * d.hd;
  MTNLG_UNROLL
  for (int mi = 0; mi < kM; ++mi) {
    MTNLG_UNROLL
    for (int r = 0; r < 2; ++r) {
      l[mi][r] += w.shfl_xor(l[mi][r], 1);
      l[mi][r] += w.shfl_xor(l[mi][r], 2);
    }
    MTNLG_UNROLL
    for (int r = 0; r < 2; ++r) {
      const int64_t row = rows[mi][r];
      if (row >= s) continue;
      const float inv = 1.0f / l[mi][r];
      MTNLG_UNROLL
      for (int j = 0; j < kOTiles; ++j)
        mma::store_pair(out + row * d.ldo() + j * 8 + 2 * t,
                        pack_floats<T>(o[mi][j][2 * r] * inv, o[mi][j][2 * r + 1] * inv));
      // The contract's log-sum-exp is natural: the base-2 maximum times ln 2.
      if (t == 0) a.lse[(b * d.heads + h) * s + row] = m[mi][r] * kLn2 + logf(l[mi][r]);
    }
  }
}

}  // namespace mtnlg::kernels::flash2
