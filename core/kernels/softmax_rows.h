// The causal softmax rows of the blocked attention (core/cuda/attention_cuda.cu), one warp a row,
// the row held in registers: forward reads its scores once (the loop kernels read them three
// times: maximum, sum, output) and backward reads the scores and their gradient once and draws
// each dropout word once (the loop kernels read both and drew the words again for the output).
// Lane l holds columns 128 c + 4 l + {0, 1, 2, 3} for chunks c < kChunks: one 16-byte load of
// fp32 scores, one Philox block of dropout words (KeepMask), one 8-byte store of bf16. Rows of
// up to 128 kChunks columns, a multiple of 4 (chunks_for); the loop kernels take the rest.
//
// A thread's program, written once for two executors, as core/kernels/flash2_forward.h's: W
// provides shfl_xor(v, mask) (the hardware's __shfl_xor_sync, or tests/core/simt_emulator.h on
// the CPU, which checks every lane of the warp reaches each shuffle). Scores and their
// gradient are fp32 (acc_t of bf16, fp16 and fp32); f64 takes the loop kernels.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/hostdevice.h"
#include "core/kernels/bf16_math.h"
#include "core/kernels/dropout_math.h"
#include "core/rng.h"

namespace mtnlg::kernels::softmax_rows {

constexpr int kGroup = 4;                // consecutive columns of a lane: one Philox block
constexpr int kChunkCols = 32 * kGroup;  // columns of a chunk, over the warp

// Chunks a lane holds for rows of s columns: the smallest of 4, 8 and 16 that covers s (each a
// template instance, its registers sized by it), or 0 where the register kernels do not apply:
// s not a multiple of 4 (a lane's 4 columns would not be one aligned load) or over 2048.
MTNLG_HD constexpr int chunks_for(int64_t s) {
  if (s <= 0 || s % kGroup != 0) return 0;
  if (s <= 4 * kChunkCols) return 4;
  if (s <= 8 * kChunkCols) return 8;
  if (s <= 16 * kChunkCols) return 16;
  return 0;
}

// One row of one sequence's [heads, s, s] scores.
struct Row {
  int64_t i;      // its query position: columns [0, i] are visible
  int64_t end;    // columns written, [0, end): the end of its causal block, a multiple of 4
  uint64_t elem;  // the dropout element index of its column 0
};

// Four fp32 at p, 16-byte aligned: one vector load on the device.
MTNLG_HD void load4(float (&v)[4], const float* p) {
#if defined(__CUDA_ARCH__)
  const float4 q = *reinterpret_cast<const float4*>(p);
  v[0] = q.x;
  v[1] = q.y;
  v[2] = q.z;
  v[3] = q.w;
#else
  for (int k = 0; k < 4; ++k) v[k] = p[k];
#endif
}

// v rounded to T into p[0..3] (8-byte aligned for 2-byte T, 16 for float): one vector store.
template <typename T>
MTNLG_HD void store4(T* p, const float (&v)[4]) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 2) {
    uint2 u;
    u.x = static_cast<uint32_t>(T(v[0]).bits) | (static_cast<uint32_t>(T(v[1]).bits) << 16);
    u.y = static_cast<uint32_t>(T(v[2]).bits) | (static_cast<uint32_t>(T(v[3]).bits) << 16);
    *reinterpret_cast<uint2*>(p) = u;
  } else {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  }
#else
  for (int k = 0; k < 4; ++k) p[k] = static_cast<T>(v[k]);
#endif
}

template <typename W>
MTNLG_HD float warp_sum(W& w, float v) {
  for (int o = 16; o > 0; o /= 2) v += w.shfl_xor(v, o);
  return v;
}

template <typename W>
MTNLG_HD float warp_max(W& w, float v) {
  for (int o = 16; o > 0; o /= 2) {
    const float u = w.shfl_xor(v, o);
    v = u > v ? u : v;
  }
  return v;
}

// A lane's probabilities rounded to T, [kChunks][kGroup]: two to a register for 2-byte T (their
// bits), which keeps backward's whole row in registers at 16 chunks without spilling.
template <typename T, int kChunks>
class HeldProbs {
 public:
  MTNLG_HD void set(int c, int k, T p) {
    if constexpr (kPacked) {
      const uint32_t shift = 16u * static_cast<uint32_t>(k % 2);
      v_[c][k / 2] =
          (v_[c][k / 2] & ~(0xffffu << shift)) | (static_cast<uint32_t>(p.bits) << shift);
    } else {
      v_[c][k] = p;
    }
  }
  MTNLG_HD float get(int c, int k) const {
    if constexpr (kPacked) {
      T p;
      p.bits = static_cast<uint16_t>(v_[c][k / 2] >> (16u * static_cast<uint32_t>(k % 2)));
      return static_cast<float>(p);
    } else {
      return static_cast<float>(v_[c][k]);
    }
  }

 private:
  static constexpr bool kPacked = sizeof(T) == 2;
  std::conditional_t<kPacked, uint32_t, T> v_[kChunks][kPacked ? kGroup / 2 : kGroup] = {};
};

// Softmax forward of row r from its scaled scores x: lse = log sum_{j<=i} exp(x_j) (lane 0
// writes it), and for columns [0, end): p_j = exp(x_j - lse) (0 past i) into p when p is not
// null, p_j * keep_j * drop_scale into pd when pd is not null. Every lane of the warp calls it.
template <typename T, int kChunks, typename W>
MTNLG_HD void forward_row(W& w, int lane, T* p, T* pd, float* lse, const float* x, const Row& r,
                          float dropout_p, float drop_scale, RngStream rng) {
  float v[kChunks][kGroup];
  float mx = -INFINITY;
  MTNLG_UNROLL
  for (int c = 0; c < kChunks; ++c) {
    const int64_t j0 = c * kChunkCols + kGroup * lane;
    if (j0 <= r.i) {
      load4(v[c], x + j0);
      MTNLG_UNROLL
      for (int k = 0; k < kGroup; ++k) {
        if (j0 + k > r.i) v[c][k] = -INFINITY;
        mx = v[c][k] > mx ? v[c][k] : mx;
      }
    } else {
      MTNLG_UNROLL
      for (int k = 0; k < kGroup; ++k) v[c][k] = -INFINITY;
    }
  }
  mx = warp_max(w, mx);  // finite: column 0 is every row's
  float sum = 0.0f;
  MTNLG_UNROLL
  for (int c = 0; c < kChunks; ++c) {
    const int64_t j0 = c * kChunkCols + kGroup * lane;
    if (j0 > r.i) continue;
    MTNLG_UNROLL
    for (int k = 0; k < kGroup; ++k)
      if (j0 + k <= r.i) sum += expf(v[c][k] - mx);
  }
  const float l = mx + logf(warp_sum(w, sum));
  if (lane == 0) *lse = l;
  KeepMask mask(rng, dropout_p);
  MTNLG_UNROLL
  for (int c = 0; c < kChunks; ++c) {
    const int64_t j0 = c * kChunkCols + kGroup * lane;
    if (j0 >= r.end) continue;
    float e[kGroup], d[kGroup];
    MTNLG_UNROLL
    for (int k = 0; k < kGroup; ++k) {
      const int64_t j = j0 + k;
      e[k] = j <= r.i ? expf(v[c][k] - l) : 0.0f;
      const bool keep = pd != nullptr && j <= r.i && mask.keep(r.elem + static_cast<uint64_t>(j));
      d[k] = keep ? e[k] * drop_scale : 0.0f;
    }
    if (p != nullptr) store4(p + j0, e);
    if (pd != nullptr) store4(pd + j0, d);
  }
}

// Softmax backward of row r: with p_j = exp(x_j - l) rounded to T (forward's probabilities,
// from the recomputed scores x and forward's log-sum-exp l) and d_j = dpd_j * keep_j *
// drop_scale (dpd_j without dropout), writes ds_j = p_j (d_j - sum_k d_k p_k) and pv_j = p_j *
// keep_j * drop_scale (p_j without dropout: dV's operand), both 0 past i, for columns [0, end).
template <typename T, int kChunks, typename W>
MTNLG_HD void backward_row(W& w, int lane, T* ds, T* pv, const float* dpd, const float* x, float l,
                           const Row& r, float dropout_p, float drop_scale, RngStream rng) {
  const bool drop = dropout_p > 0.0f;
  HeldProbs<T, kChunks> pr;
  float d[kChunks][kGroup];
  // Keep bits, bit kGroup * (c % 8) + k of kept[c / 8]: drawn once, used twice.
  uint32_t kept[(kChunks + 7) / 8] = {};
  KeepMask mask(rng, dropout_p);
  float dot = 0.0f;
  MTNLG_UNROLL
  for (int c = 0; c < kChunks; ++c) {
    const int64_t j0 = c * kChunkCols + kGroup * lane;
    MTNLG_UNROLL
    for (int k = 0; k < kGroup; ++k) d[c][k] = 0.0f;
    if (j0 > r.i) continue;
    float xs[kGroup], ds4[kGroup];
    load4(xs, x + j0);
    load4(ds4, dpd + j0);
    MTNLG_UNROLL
    for (int k = 0; k < kGroup; ++k) {
      const int64_t j = j0 + k;
      if (j > r.i) continue;
      const T pt = static_cast<T>(expf(xs[k] - l));
      pr.set(c, k, pt);
      d[c][k] = ds4[k];
      if (drop) {
        const bool keep = mask.keep(r.elem + static_cast<uint64_t>(j));
        d[c][k] = keep ? d[c][k] * drop_scale : 0.0f;
        if (keep) kept[c / 8] |= 1u << (kGroup * (c % 8) + k);
      }
      dot += d[c][k] * static_cast<float>(pt);
    }
  }
  dot = warp_sum(w, dot);
  MTNLG_UNROLL
  for (int c = 0; c < kChunks; ++c) {
    const int64_t j0 = c * kChunkCols + kGroup * lane;
    if (j0 >= r.end) continue;
    float g[kGroup], q[kGroup];
    MTNLG_UNROLL
    for (int k = 0; k < kGroup; ++k) {
      const bool visible = j0 + k <= r.i;
      const bool keep = !drop || ((kept[c / 8] >> (kGroup * (c % 8) + k)) & 1u) != 0;
      const float pk = pr.get(c, k);
      g[k] = visible ? pk * (d[c][k] - dot) : 0.0f;
      q[k] = visible && keep ? (drop ? pk * drop_scale : pk) : 0.0f;
    }
    store4(ds + j0, g);
    store4(pv + j0, q);
  }
}

}  // namespace mtnlg::kernels::softmax_rows
