// Causal attention backward, FlashAttention-2 style, deterministic: two passes that each
// recompute the probabilities from the scores and forward's log-sum-exps, with the scores, the
// probabilities, their gradients and the accumulators in registers (core/kernels/
// flash2_forward.h says how; the same executor W, the same fragments). No atomics, so the same
// bits every run:
//   dq_thread, per 64 query rows (16 a warp): delta_i = dO_i . O_i (kept for the second pass),
//     then over 32-key tiles dP = dO V^T, dS = P (dropped dP - delta), dQ += dS K.
//   dkv_thread, per 64 keys (16 a warp): over 32-query tiles the transposed products,
//     S^T = K Q^T, dP^T = V dO^T, dV += (dropped P)^T dO, dK += dS^T Q.
// Or with dS stored (the default on the GPU; MTNLG_CUDA_FLASH2_DQ=recompute for the above), three
// passes and five products per tile instead of seven:
//   prep_thread, per 64 query rows: delta and the keep bits (dq_thread's, without its products);
//   dkv_thread as above, which also stores dS^T (as rounded for dK's product) in a.ds;
//   dq_stored_thread, per 64 query rows: dQ = dS K over the keys the rows see, dS read back.
// The dq pass's recomputed S = Q K^T and dP = dO V^T, and its softmax, give way to one write and
// one read of dS (2 bytes an element of the causal half).
// Contract: core/backend.h's attention_backward (core/kernels/flash_common.h): dqkv overwritten
// (its q columns by the first pass, k and v by the second), delta [b, heads, s] scratch between
// them, dropout regenerated from the CPU's element index. K and V (first pass) or Q and dO (second)
// pass through shared memory; the operands a warp multiplies by from the left come from shared
// memory too, where registers would not hold them at head size 128.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/hostdevice.h"
#include "core/kernels/dropout_math.h"
#include "core/kernels/flash2_forward.h"
#include "core/kernels/flash_common.h"
#include "core/kernels/mma_fragment.h"

namespace mtnlg::kernels::flash2 {

constexpr int kBwdRows = 64;  // query rows (first pass) or keys (second) of a block: 16 a warp
constexpr int kBwdTile = 32;  // keys (first pass) or query rows (second) of a tile

// Shared memory of either pass: two [64][hd + 8] blocks, two buffers of two [32][hd + 8] tiles
// (the next tile arrives by cp.async while the warps multiply by the current one), and the
// second pass's log-sum-exps, deltas and keep words of its tile. 69 KiB at head size 128.
template <typename T>
MTNLG_HD size_t backward_smem_bytes(int64_t hd) {
  return static_cast<size_t>(2 * kBwdRows + 4 * kBwdTile) * static_cast<size_t>(hd + 8) *
             sizeof(T) +
         2 * kBwdTile * sizeof(float) + kBwdTile * (kBwdRows / 32) * sizeof(uint32_t);
}

// With dropout the first pass records its keep decisions, one bit per (row, key), in 32-bit
// words [b, heads, s, keep_words(s)], and the second reads them: a thread of the second pass
// holds two keys of many rows, never four consecutive keys of one row, so drawing there would
// cost one Philox block per decision instead of one per four.
MTNLG_HD int64_t keep_words(int64_t s) {
  return (s + 31) / 32;
}

// dS^T's leading dimension with dS stored: s rounded up to 8 elements, so that every row starts
// 16 bytes aligned (cp.async).
MTNLG_HD int64_t ds_ld(int64_t s) {
  return (s + 7) / 8 * 8;
}

// dS^T [b, heads, s, ds_ld(s)] of 2-byte elements, and a block's width of slack past the end: a
// dq block's tile reads 64 columns from its first query row, past the end of the last key's row
// in the last block (columns no stored row reads back).
MTNLG_HD int64_t ds_bytes(int64_t b, int64_t heads, int64_t s) {
  return (b * heads * s * ds_ld(s) + kBwdRows) * 2;
}

// The backward's scratch from the backend's workspace: delta, 4 bytes a row; with dropout the
// keep bits; with dS stored, dS^T from ds_offset. The launcher and the planner
// (core/cuda/attention_workspace.h) both use these.
MTNLG_HD int64_t ds_offset(int64_t b, int64_t heads, int64_t s, bool dropout) {
  const int64_t stats = b * heads * s * 4 + (dropout ? b * heads * s * keep_words(s) * 4 : 0);
  return (stats + 15) / 16 * 16;
}
MTNLG_HD int64_t backward_scratch_bytes(int64_t b, int64_t heads, int64_t s, bool dropout,
                                        bool stored_ds = false) {
  if (stored_ds) return ds_offset(b, heads, s, dropout) + ds_bytes(b, heads, s);
  return b * heads * s * 4 + (dropout ? b * heads * s * keep_words(s) * 4 : 0);
}

// Keys of a tile of the stored-dS dq pass (dq_stored_thread): a query block's worth, so that a
// block's last tile is its diagonal block.
constexpr int kDqTile = 64;
static_assert(kDqTile == kBwdRows, "the last tile of a dq block is its diagonal block");

// Shared memory of the stored-dS dq pass: two buffers of a dS^T tile [64][64 + 8] and a K tile
// [64][hd + 8]. 52 KiB at head size 128.
template <typename T>
MTNLG_HD size_t dq_stored_smem_bytes(int64_t hd) {
  return static_cast<size_t>(2 * kDqTile) * static_cast<size_t>(kBwdRows + 8 + hd + 8) * sizeof(T);
}

MTNLG_HD int64_t backward_blocks(int64_t s) {
  return (s + kBwdRows - 1) / kBwdRows;
}

// The A fragment of the 16 x 16 block made by two 8-column accumulator tiles side by side.
template <typename T>
MTNLG_HD void pack_a(uint32_t (&frag)[4], const float (&left)[4], const float (&right)[4]) {
  frag[0] = pack_floats<T>(left[0], left[1]);
  frag[1] = pack_floats<T>(left[2], left[3]);
  frag[2] = pack_floats<T>(right[0], right[1]);
  frag[3] = pack_floats<T>(right[2], right[3]);
}

// A warp's dq accumulators (its two rows' of this lane, kOTiles n tiles of the head's columns),
// scaled, into dqkv's q columns; rows past the sequence are not stored.
template <typename T, int kOTiles>
MTNLG_HD void store_dq(const flash::BackwardArgs<T>& a, int64_t b, int64_t h,
                       const int64_t (&rows)[2], int t, const float (&dq)[kOTiles][4]) {
  const int64_t s = a.d.s, ldq = a.d.ldq();
  T* dqkv = a.dqkv + b * s * ldq + h * 3 * a.d.hd;
  MTNLG_UNROLL
  for (int r = 0; r < 2; ++r) {
    if (rows[r] >= s) continue;
    MTNLG_UNROLL
    for (int j = 0; j < kOTiles; ++j)
      mma::store_pair(dqkv + rows[r] * ldq + j * 8 + 2 * t,
                      pack_floats<T>(dq[j][2 * r] * a.scale, dq[j][2 * r + 1] * a.scale));
  }
}

// First pass: delta and dq for query rows [rb*64, rb*64 + 64) of head h of sequence b.
template <typename T, int HD, typename W>
MTNLG_HD void dq_thread(W& w, char* smem, const flash::BackwardArgs<T>& a, int64_t b, int64_t h,
                        int64_t rb) {
  static_assert(HD % 16 == 0, "head size a multiple of 16");
  constexpr int ld = HD + 8;
  constexpr int kSteps = HD / 16, kOTiles = HD / 8;
  constexpr int kSTiles = kBwdTile / 8, kPSteps = kBwdTile / 16;
  T* sq = reinterpret_cast<T*>(smem);
  T* sdo = sq + kBwdRows * ld;
  // Two buffers of a K tile then a V tile, by arithmetic (not an array of pointers: local memory).
  const auto kv = [&](int buf) { return sdo + (kBwdRows + buf * 2 * kBwdTile) * ld; };
  const flash::Dims d = a.d;
  const int64_t s = d.s, ldq = d.ldq(), ldo = d.ldo(), r0 = rb * kBwdRows;
  const T* base = a.qkv + b * s * ldq + h * 3 * d.hd;
  const T* dout = a.dout + b * s * ldo + h * d.hd;
  const T* out = a.out + b * s * ldo + h * d.hd;
  const int tid = w.thread(), lane = tid & 31, wr = (tid >> 5) * 16;
  const int t = lane & 3;
  const int64_t rows[2] = {r0 + wr + (lane >> 2), r0 + wr + (lane >> 2) + 8};
  const int64_t first_row = r0 + wr, last_row = r0 + wr + 15;
  const bool rows_inside = last_row < s;
  const int64_t row_stat = (b * d.heads + h) * s;
  const float scale2 = a.scale * kLog2e;  // scores in base 2 (fast_exp2)

  const int64_t end = r0 + kBwdRows < s ? r0 + kBwdRows : s;  // keys the rows can see
  const auto fetch = [&](int64_t c0, int buf) {
    fetch_tiles<T, HD, kBwdTile>(w, tid, kv(buf), base + d.hd, ldq, base + 2 * d.hd, ldq, c0, s);
  };
  fetch(0, 0);
  load_tile<T, HD, kBwdRows>(tid, sq, base, ldq, r0, s);
  load_tile<T, HD, kBwdRows>(tid, sdo, dout, ldo, r0, s);
  w.sync();

  // delta_i = dO_i . O_i over the thread's columns of its two rows, then over the four lanes.
  float delta[2] = {0.0f, 0.0f};
  MTNLG_UNROLL
  for (int kk = 0; kk < kSteps; ++kk) {
    MTNLG_UNROLL
    for (int reg = 0; reg < 4; ++reg) {
      const mma::Coord c = mma::a_element(lane, 2 * reg);
      const int r = c.row >> 3;
      if (rows[r] >= s) continue;
      const uint32_t dpair = mma::load_pair(sdo + (wr + c.row) * ld + kk * 16 + c.col);
      const uint32_t opair = mma::load_pair(out + rows[r] * ldo + kk * 16 + c.col);
      T d0, d1, o0, o1;
      d0.bits = mma::low(dpair);
      d1.bits = mma::high(dpair);
      o0.bits = mma::low(opair);
      o1.bits = mma::high(opair);
      delta[r] += static_cast<float>(d0) * static_cast<float>(o0) +
                  static_cast<float>(d1) * static_cast<float>(o1);
    }
  }
  float lse2[2];  // the rows' log-sum-exps in base 2
  MTNLG_UNROLL
  for (int r = 0; r < 2; ++r) {
    delta[r] += w.shfl_xor(delta[r], 1);
    delta[r] += w.shfl_xor(delta[r], 2);
    lse2[r] = rows[r] < s ? a.lse[row_stat + rows[r]] * kLog2e : 0.0f;
    if (t == 0 && rows[r] < s) a.delta[row_stat + rows[r]] = delta[r];
  }

  float dq[kOTiles][4];
  MTNLG_UNROLL
  for (int j = 0; j < kOTiles; ++j) {
    MTNLG_UNROLL
    for (int e = 0; e < 4; ++e) dq[j][e] = 0.0f;
  }
  const bool dropout = a.dropout_p > 0.0f;
  const int64_t words = keep_words(s);
  static_assert(kBwdTile == 32, "a tile's keep decisions are one word a row");
  // As forward's: the element indices of key 2t of the thread's rows, the integer threshold.
  const uint64_t drop0 = flash::drop_index(d, b, h, rows[0], 2 * t);
  const uint64_t drop1 = flash::drop_index(d, b, h, rows[1], 2 * t);
  const uint32_t keep_threshold = dropout_threshold(a.dropout_p);

  for (int64_t c0 = 0, it = 0; c0 < end; c0 += kBwdTile, ++it) {
    const int buf = begin_tile(w, it, c0 + kBwdTile, end, fetch);
    const T* sk = kv(buf);
    const T* sv = kv(buf) + kBwdTile * ld;
    // S = Q K^T and dP = dO V^T for the warp's rows; 8-key tiles past its last row skipped.
    // The k step outside: each A fragment of Q and dO, loaded once, serves every key tile, which
    // halves the shared-memory reads (per product 384 bytes, where an A and a B fragment for
    // each product took 768: more than shared memory delivers at the tensor cores' rate).
    float sc[kSTiles][4], dp[kSTiles][4];
    MTNLG_UNROLL
    for (int nt = 0; nt < kSTiles; ++nt) {
      MTNLG_UNROLL
      for (int e = 0; e < 4; ++e) sc[nt][e] = dp[nt][e] = 0.0f;
    }
    // The products of a k step are independent, so they pipeline; only a tile reaching past the
    // warp's last row skips 8-key tiles, in its own copy of the loop (warp-uniform).
    const auto products = [&](auto guarded) {
      MTNLG_UNROLL
      for (int kk = 0; kk < kSteps; ++kk) {
        uint32_t qa[4], da[4];
        load_a(w, qa, sq, ld, wr, kk * 16, lane);
        load_a(w, da, sdo, ld, wr, kk * 16, lane);
        MTNLG_UNROLL
        for (int nt = 0; nt < kSTiles; ++nt) {
          if (decltype(guarded)::value && c0 + nt * 8 > last_row) continue;
          uint32_t kb[2], vb[2];
          load_b_rows(w, kb, sk, ld, nt * 8, kk * 16, lane);
          load_b_rows(w, vb, sv, ld, nt * 8, kk * 16, lane);
          w.template mma<T>(sc[nt], qa, kb);
          w.template mma<T>(dp[nt], da, vb);
        }
      }
    };
    if (c0 + kBwdTile - 1 <= last_row)
      products(std::false_type{});
    else if (c0 <= last_row)  // else every key of the tile is past the warp's rows
      products(std::true_type{});
    // dS = P (dropped dP - delta), 0 where the row does not see the key; in place of sc. The
    // keep decisions as bits of the tile's word for each row (key c0 + k at bit k).
    uint32_t kept_bits[2] = {0u, 0u};
    // The last key of the tile each row sees (forward's last_visible): one 32-bit comparison a
    // score; a tile the warp's rows see whole needs none (warp-uniform).
    const bool tile_whole = rows_inside && c0 + kBwdTile - 1 <= first_row;
    const int last[2] = {last_visible<kBwdTile>(rows[0], c0, s),
                         last_visible<kBwdTile>(rows[1], c0, s)};
    MTNLG_UNROLL
    for (int nt = 0; nt < kSTiles; ++nt) {
      const uint32_t keep =
          dropout && c0 + nt * 8 <= last_row
              ? keep_bits(w, a, drop0 + c0 + nt * 8, drop1 + c0 + nt * 8, keep_threshold, lane)
              : 0u;
      MTNLG_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1;
        const int col = nt * 8 + mma::c_element(lane, e).col;
        const bool seen = tile_whole || col <= last[r];
        // Computed for every element and selected (no branch): a masked one's is discarded.
        const float p = fast_exp2(sc[nt][e] * scale2 - lse2[r]);
        float g = dp[nt][e];
        if (dropout) {
          const bool kept = ((keep >> e) & 1u) != 0;
          kept_bits[r] |= static_cast<uint32_t>(kept && seen) << col;
          g = kept ? g * a.drop_scale : 0.0f;
        }
        sc[nt][e] = seen ? p * (g - delta[r]) : 0.0f;
      }
    }
    if (dropout) {  // the row's word from its four lanes
      MTNLG_UNROLL
      for (int r = 0; r < 2; ++r) {
        kept_bits[r] |= w.shfl_xor(kept_bits[r], 1);
        kept_bits[r] |= w.shfl_xor(kept_bits[r], 2);
        if (t == 0 && rows[r] < s) a.keep[(row_stat + rows[r]) * words + c0 / 32] = kept_bits[r];
      }
    }
    // dQ += dS K.
    MTNLG_UNROLL
    for (int kk = 0; kk < kPSteps; ++kk) {
      if (c0 + kk * 16 > last_row) continue;
      uint32_t sa[4];
      pack_a<T>(sa, sc[2 * kk], sc[2 * kk + 1]);
      MTNLG_UNROLL
      for (int j = 0; j < kOTiles; ++j) {
        uint32_t kb[2];
        load_b_cols(w, kb, sk, ld, kk * 16, j * 8, lane);
        w.template mma<T>(dq[j], sa, kb);
      }
    }
    w.sync();  // every warp is done with this buffer before the next fetch refills it
  }
  store_dq(a, b, h, rows, t, dq);
}

// Second pass: dk and dv for keys [kb*64, kb*64 + 64) of head h of sequence b, over the query
// rows that see them; delta from the first pass.
template <typename T, int HD, typename W>
MTNLG_HD void dkv_thread(W& w, char* smem, const flash::BackwardArgs<T>& a, int64_t b, int64_t h,
                         int64_t kb) {
  static_assert(HD % 16 == 0, "head size a multiple of 16");
  constexpr int ld = HD + 8;
  constexpr int kSteps = HD / 16, kOTiles = HD / 8;
  constexpr int kSTiles = kBwdTile / 8, kPSteps = kBwdTile / 16;
  T* sk = reinterpret_cast<T*>(smem);
  T* sv = sk + kBwdRows * ld;
  // Two buffers of a Q tile then a dO tile, by arithmetic.
  const auto qdo = [&](int buf) { return sv + (kBwdRows + buf * 2 * kBwdTile) * ld; };
  float* slse = reinterpret_cast<float*>(sv + (kBwdRows + 4 * kBwdTile) * ld);
  float* sdelta = slse + kBwdTile;
  constexpr int kKeyWords = kBwdRows / 32;  // keep words of a row for the block's keys
  uint32_t* skeep = reinterpret_cast<uint32_t*>(sdelta + kBwdTile);  // [kBwdTile][kKeyWords]
  const flash::Dims d = a.d;
  const int64_t s = d.s, ldq = d.ldq(), ldo = d.ldo(), k0 = kb * kBwdRows;
  const T* base = a.qkv + b * s * ldq + h * 3 * d.hd;
  const T* dout = a.dout + b * s * ldo + h * d.hd;
  const int tid = w.thread(), lane = tid & 31, wr = (tid >> 5) * 16;
  const int t = lane & 3;
  const int64_t keys[2] = {k0 + wr + (lane >> 2), k0 + wr + (lane >> 2) + 8};
  const int64_t first_key = k0 + wr;                           // the warp's
  const int kj[2] = {wr + (lane >> 2), wr + (lane >> 2) + 8};  // keys[r] - k0
  const int64_t row_stat = (b * d.heads + h) * s;
  const float scale2 = a.scale * kLog2e;  // scores in base 2 (fast_exp2)

  const auto fetch = [&](int64_t q0, int buf) {
    fetch_tiles<T, HD, kBwdTile>(w, tid, qdo(buf), base, ldq, dout, ldo, q0, s);
  };
  fetch(k0, 0);  // rows before k0 see none of these keys
  load_tile<T, HD, kBwdRows>(tid, sk, base + d.hd, ldq, k0, s);
  load_tile<T, HD, kBwdRows>(tid, sv, base + 2 * d.hd, ldq, k0, s);

  float dk[kOTiles][4], dv[kOTiles][4];
  MTNLG_UNROLL
  for (int j = 0; j < kOTiles; ++j) {
    MTNLG_UNROLL
    for (int e = 0; e < 4; ++e) dk[j][e] = dv[j][e] = 0.0f;
  }
  // The keep decisions: the first pass's bits (keep_words says why).
  const bool dropout = a.dropout_p > 0.0f;
  const int64_t words = keep_words(s);

  // A tile's row statistics and keep words, this thread's slot of them (threads below kBwdTile:
  // a row's log-sum-exp and delta; below kBwdTile * kKeyWords: a keep word), loaded one tile
  // ahead into registers: loaded just before the barrier that begins the tile, as they were,
  // their global-memory latency stalled every tile.
  float next_lse = 0.0f, next_delta = 0.0f;
  uint32_t next_keep = 0u;
  const auto load_stats = [&](int64_t q0) {
    if (tid < kBwdTile) {
      const bool in = q0 + tid < s;
      next_lse = in ? a.lse[row_stat + q0 + tid] * kLog2e : 0.0f;  // base 2
      next_delta = in ? a.delta[row_stat + q0 + tid] : 0.0f;
    }
    if (dropout && tid < kBwdTile * kKeyWords) {
      const int r = tid / kKeyWords, k = tid % kKeyWords;
      const int64_t word = k0 / 32 + k;
      next_keep = q0 + r < s && word < words ? a.keep[(row_stat + q0 + r) * words + word] : 0u;
    }
  };
  load_stats(k0);

  for (int64_t q0 = k0, it = 0; q0 < s; q0 += kBwdTile, ++it) {
    // The tile's statistics into shared memory (single-buffered: written after the barrier that
    // ends the previous tile and before the one that begins this one), the next tile's loads
    // issued.
    if (tid < kBwdTile) {
      slse[tid] = next_lse;
      sdelta[tid] = next_delta;
    }
    if (dropout && tid < kBwdTile * kKeyWords) skeep[tid] = next_keep;
    if (q0 + kBwdTile < s) load_stats(q0 + kBwdTile);
    const int buf = begin_tile(w, it, q0 + kBwdTile, s, fetch);
    const T* sq = qdo(buf);
    const T* sdo = qdo(buf) + kBwdTile * ld;
    // S^T = K Q^T and dP^T = V dO^T for the warp's keys; 8-row tiles wholly before its first
    // key skipped.
    // The k step outside, as in the first pass: each A fragment of K and V serves every row tile.
    float st[kSTiles][4], dpt[kSTiles][4];
    MTNLG_UNROLL
    for (int nt = 0; nt < kSTiles; ++nt) {
      MTNLG_UNROLL
      for (int e = 0; e < 4; ++e) st[nt][e] = dpt[nt][e] = 0.0f;
    }
    const auto products = [&](auto guarded) {
      MTNLG_UNROLL
      for (int kk = 0; kk < kSteps; ++kk) {
        uint32_t ka[4], va[4];
        load_a(w, ka, sk, ld, wr, kk * 16, lane);
        load_a(w, va, sv, ld, wr, kk * 16, lane);
        MTNLG_UNROLL
        for (int nt = 0; nt < kSTiles; ++nt) {
          if (decltype(guarded)::value && q0 + nt * 8 + 7 < first_key) continue;
          uint32_t qb[2], db[2];
          load_b_rows(w, qb, sq, ld, nt * 8, kk * 16, lane);
          load_b_rows(w, db, sdo, ld, nt * 8, kk * 16, lane);
          w.template mma<T>(st[nt], ka, qb);
          w.template mma<T>(dpt[nt], va, db);
        }
      }
    };
    if (q0 + 7 >= first_key)  // warp-uniform: every 8-row tile reaches the warp's keys
      products(std::false_type{});
    else if (q0 + kBwdTile - 1 >= first_key)  // else every row is before the warp's keys
      products(std::true_type{});
    // P^T, dropped (in st, for dV) and dS^T = P (dropped dP - delta) (in dpt, for dK).
    // Row q0 + i (i the offset in the tile) sees key j when i >= j - q0 and q0 + i < s
    // (causal), as 32-bit comparisons of i with two bounds worked out once a tile; a tile
    // whose every row sees every key of the warp needs neither (warp-uniform).
    const bool tile_whole = q0 >= first_key + 15 && q0 + kBwdTile - 1 < s;
    const auto offset_in_tile = [&](int64_t x) {
      return x <= q0 ? 0 : x >= q0 + kBwdTile ? kBwdTile : static_cast<int>(x - q0);
    };
    const int first_seen[2] = {offset_in_tile(keys[0]), offset_in_tile(keys[1])};
    const int rows_in = offset_in_tile(s);
    MTNLG_UNROLL
    for (int nt = 0; nt < kSTiles; ++nt) {
      MTNLG_UNROLL
      for (int e = 0; e < 4; ++e) {
        const mma::Coord c = mma::c_element(lane, e);
        const int i = nt * 8 + c.col, r = c.row >> 3;
        const bool seen = tile_whole || (i >= first_seen[r] && i < rows_in);
        // Computed for every element and selected (no branch): a masked one's is discarded.
        const float p = fast_exp2(st[nt][e] * scale2 - slse[nt * 8 + c.col]);
        const bool kept =
            !dropout || ((skeep[(nt * 8 + c.col) * kKeyWords + kj[r] / 32] >> (kj[r] % 32)) & 1u);
        const float keep_scale = kept ? (dropout ? a.drop_scale : 1.0f) : 0.0f;
        st[nt][e] = seen ? p * keep_scale : 0.0f;
        dpt[nt][e] = seen ? p * (dpt[nt][e] * keep_scale - sdelta[nt * 8 + c.col]) : 0.0f;
      }
    }
    if (a.ds != nullptr) {
      // dS^T for the dq pass (dq_stored_thread), rounded to T as dK's product takes it: a pair of
      // query rows of each key a store, 0 where the row does not see the key (that pass reads
      // the diagonal block whole). Rows past s are not stored.
      MTNLG_UNROLL
      for (int r = 0; r < 2; ++r) {
        if (keys[r] >= s) continue;
        T* to = a.ds + (row_stat + keys[r]) * a.ld_ds + q0 + 2 * t;
        MTNLG_UNROLL
        for (int nt = 0; nt < kSTiles; ++nt)
          if (q0 + nt * 8 + 2 * t < s)
            mma::store_pair(to + nt * 8, pack_floats<T>(dpt[nt][2 * r], dpt[nt][2 * r + 1]));
      }
    }
    // dV += (dropped P)^T dO and dK += dS^T Q.
    MTNLG_UNROLL
    for (int kk = 0; kk < kPSteps; ++kk) {
      if (q0 + kk * 16 + 15 < first_key) continue;
      uint32_t pa[4], sa[4];
      pack_a<T>(pa, st[2 * kk], st[2 * kk + 1]);
      pack_a<T>(sa, dpt[2 * kk], dpt[2 * kk + 1]);
      MTNLG_UNROLL
      for (int j = 0; j < kOTiles; ++j) {
        uint32_t db[2], qb[2];
        load_b_cols(w, db, sdo, ld, kk * 16, j * 8, lane);
        load_b_cols(w, qb, sq, ld, kk * 16, j * 8, lane);
        w.template mma<T>(dv[j], pa, db);
        w.template mma<T>(dk[j], sa, qb);
      }
    }
    w.sync();  // every warp is done with this buffer and the statistics before the next tile's
  }

  T* dqkv = a.dqkv + b * s * ldq + h * 3 * d.hd;
  MTNLG_UNROLL
  for (int r = 0; r < 2; ++r) {
    if (keys[r] >= s) continue;
    MTNLG_UNROLL
    for (int j = 0; j < kOTiles; ++j) {
      const int col = j * 8 + 2 * t;
      mma::store_pair(dqkv + keys[r] * ldq + HD + col,
                      pack_floats<T>(dk[j][2 * r] * a.scale, dk[j][2 * r + 1] * a.scale));
      mma::store_pair(dqkv + keys[r] * ldq + 2 * HD + col,
                      pack_floats<T>(dv[j][2 * r], dv[j][2 * r + 1]));
    }
  }
}

// The stored-dS backward's first pass, for query rows [rb*64, rb*64 + 64) of head h of sequence
// b: delta_i = dO_i . O_i (two threads a row, half the head's columns each) and with dropout the
// rows' keep words for the keys up to the end of their block, as dq_thread writes them (bit k of
// word c for key 32 c + k: kept and seen), each word by one thread walking its keys in order (a
// Philox block per four). No products, no shared memory.
template <typename T, int HD, typename W>
MTNLG_HD void prep_thread(W& w, const flash::BackwardArgs<T>& a, int64_t b, int64_t h, int64_t rb) {
  static_assert(kThreads == 2 * kBwdRows, "two threads a row");
  const flash::Dims d = a.d;
  const int64_t s = d.s, ldo = d.ldo(), r0 = rb * kBwdRows;
  const int64_t row_stat = (b * d.heads + h) * s;
  const int tid = w.thread();
  const int64_t i = r0 + tid / 2;
  const int half = tid & 1;
  float delta = 0.0f;
  if (i < s) {
    const int64_t at = (b * s + i) * ldo + h * d.hd + half * (HD / 2);
    MTNLG_UNROLL
    for (int c = 0; c < HD / 2; c += 2) {
      const uint32_t dpair = mma::load_pair(a.dout + at + c);
      const uint32_t opair = mma::load_pair(a.out + at + c);
      T d0, d1, o0, o1;
      d0.bits = mma::low(dpair);
      d1.bits = mma::high(dpair);
      o0.bits = mma::low(opair);
      o1.bits = mma::high(opair);
      delta += static_cast<float>(d0) * static_cast<float>(o0) +
               static_cast<float>(d1) * static_cast<float>(o1);
    }
  }
  delta += w.shfl_xor(delta, 1);
  if (half == 0 && i < s) a.delta[row_stat + i] = delta;
  if (!(a.dropout_p > 0.0f)) return;
  const int64_t words = keep_words(s);
  const int64_t end = r0 + kBwdRows < s ? r0 + kBwdRows : s;  // keys the rows can see
  const int row_words = static_cast<int>((end + 31) / 32);
  for (int e = tid; e < kBwdRows * row_words; e += kThreads) {
    const int64_t row = r0 + e / row_words, c = e % row_words;
    if (row >= s) break;  // e grows with row
    KeepMask mask(a.rng, a.dropout_p);
    const uint64_t n0 = flash::drop_index(d, b, h, row, 32 * c);
    const int seen = row - 32 * c >= 31 ? 32 : static_cast<int>(row - 32 * c) + 1;
    uint32_t word = 0u;
    for (int k = 0; k < seen; ++k) word |= static_cast<uint32_t>(mask.keep(n0 + k)) << k;
    a.keep[(row_stat + row) * words + c] = word;
  }
}

// The stored-dS backward's last pass: dq for query rows [rb*64, rb*64 + 64) of head h of sequence
// b, dQ = scale * dS K over the keys the rows see, dS read back from the dk/dv pass's dS^T (zero
// above the diagonal within the rows' block). Each tile of 64 keys brings its dS^T [64][64] and K
// [64][hd] into shared memory (double-buffered, cp.async); a warp's A fragments of dS are its 16
// rows of the dS^T tile read transposed (ldmatrix .trans), as the recomputing pass's came from
// its registers, and each ldmatrix of K serves two products. 64-key tiles: the loop's fixed cost
// (the fetch, its barriers) over 64 products a warp instead of 32.
template <typename T, int HD, typename W>
MTNLG_HD void dq_stored_thread(W& w, char* smem, const flash::BackwardArgs<T>& a, int64_t b,
                               int64_t h, int64_t rb) {
  static_assert(HD % 16 == 0, "head size a multiple of 16");
  constexpr int ld = HD + 8, lds = kBwdRows + 8;
  constexpr int kOTiles = HD / 8, kPSteps = kDqTile / 16;
  static_assert(kOTiles % 2 == 0, "n tiles in pairs (load_b_cols2)");
  // Buffer buf: a dS^T tile [kDqTile][lds] then a K tile [kDqTile][ld], by arithmetic.
  const auto tile = [&](int buf) {
    return reinterpret_cast<T*>(smem) + buf * kDqTile * (lds + ld);
  };
  const flash::Dims d = a.d;
  const int64_t s = d.s, ldq = d.ldq(), r0 = rb * kBwdRows;
  const T* base = a.qkv + b * s * ldq + h * 3 * d.hd;
  const T* dst = a.ds + (b * d.heads + h) * s * a.ld_ds + r0;  // dS^T, the block's columns
  const int tid = w.thread(), lane = tid & 31, wr = (tid >> 5) * 16;
  const int t = lane & 3;
  const int64_t rows[2] = {r0 + wr + (lane >> 2), r0 + wr + (lane >> 2) + 8};
  const int64_t last_row = r0 + wr + 15;
  const int64_t end = r0 + kBwdRows < s ? r0 + kBwdRows : s;  // keys the rows can see
  // The tiles are fetched in order, so each operand's next rows are a pointer that steps by a
  // tile: worked out from the tile's first key instead, the SASS recomputed the operands' bases
  // (64-bit products of the head, sequence and strides) for every tile, about as many
  // instructions as the tile's products.
  const T* ds_next = dst;         // dS^T rows of the next tile
  const T* k_next = base + d.hd;  // K rows of the next tile
  int64_t left = s;               // keys from the next tile's first to the sequence's end
  const auto fetch = [&](int64_t, int buf) {
    load_tile_async<T, kBwdRows, kDqTile>(w, tid, tile(buf), ds_next, a.ld_ds, 0, left);
    load_tile_async<T, HD, kDqTile>(w, tid, tile(buf) + kDqTile * lds, k_next, ldq, 0, left);
    w.cp_async_commit();
    ds_next += kDqTile * a.ld_ds;
    k_next += kDqTile * ldq;
    left -= kDqTile;
  };
  fetch(0, 0);
  float dq[kOTiles][4];
  MTNLG_UNROLL
  for (int j = 0; j < kOTiles; ++j) {
    MTNLG_UNROLL
    for (int e = 0; e < 4; ++e) dq[j][e] = 0.0f;
  }
  for (int64_t c0 = 0, it = 0; c0 < end; c0 += kDqTile, ++it) {
    const int buf = begin_tile(w, it, c0 + kDqTile, end, fetch);
    const T* sds = tile(buf);
    const T* sk = sds + kDqTile * lds;
    MTNLG_UNROLL
    for (int kk = 0; kk < kPSteps; ++kk) {
      if (c0 + kk * 16 > last_row) continue;  // keys past the warp's rows: dS is 0
      uint32_t sa[4];
      load_a_trans(w, sa, sds, lds, wr, kk * 16, lane);
      MTNLG_UNROLL
      for (int j = 0; j < kOTiles; j += 2) {
        uint32_t kb[4];  // two n tiles' B fragments, one ldmatrix
        load_b_cols2(w, kb, sk, ld, kk * 16, j * 8, lane);
        const uint32_t lo[2] = {kb[0], kb[1]}, hi[2] = {kb[2], kb[3]};
        w.template mma<T>(dq[j], sa, lo);
        w.template mma<T>(dq[j + 1], sa, hi);
      }
    }
    w.sync();  // every warp is done with this buffer before the next fetch refills it
  }
  store_dq(a, b, h, rows, t, dq);
}

}  // namespace mtnlg::kernels::flash2
