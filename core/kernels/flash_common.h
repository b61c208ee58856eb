// What the FA2-style attention kernels (core/kernels/flash2_forward.h, flash2_backward.h) and
// their CUDA launchers share: the problem's dimensions, the arguments of each pass, 16-byte
// copies and the dropout element index.
//
// Contract (core/backend.h): qkv [b, s, heads*3*hd] with head h's q, k, v at columns
// h*3*hd + {0, hd, 2hd}; out [b, s, heads*hd]; stats [b, heads, s] each row's log-sum-exp of
// its scaled scores; dropout keeps element ((b*heads + h)*s + i)*s + j with core/rng.h's
// dropout_keep, the CPU's index, so any backward continues from any forward.
//
// (The first flash kernels, wmma tiles staged through shared memory, shared this header until
// the FA2-style ones replaced them; they were removed on 2026-11-27: docs/attention-kernels.md.)
#pragma once

#include <cstdint>
#include <cstring>

#include "core/hostdevice.h"
#include "core/rng.h"

namespace mtnlg::kernels::flash {

constexpr int kRows = 64;  // query rows of a block

struct Dims {
  int64_t b, s, heads, hd;
  MTNLG_HD int64_t ldq() const { return heads * 3 * hd; }
  MTNLG_HD int64_t ldo() const { return heads * hd; }
};

template <typename T>
struct ForwardArgs {
  const T* qkv;
  T* out;
  float* lse;  // stats
  Dims d;
  float scale, dropout_p, drop_scale;
  RngStream rng;
};

template <typename T>
struct BackwardArgs {
  const T* qkv;
  const T* out;
  const T* dout;
  const float* lse;
  float* delta;  // [b, heads, s]: written by the dq (or prep) pass, read by the dk/dv pass
  T* dqkv;
  Dims d;
  float scale, dropout_p, drop_scale;
  RngStream rng;
  // With dropout: the keep decisions, written as bits by the first pass and read by the second.
  uint32_t* keep = nullptr;
  // With dS stored (flash2_backward.h, dq_stored_thread): dS^T [b, heads, s, ld_ds], written by
  // the dk/dv pass and read by the dq pass; null: dq recomputes dS.
  T* ds = nullptr;
  int64_t ld_ds = 0;
};

// 16 bytes (8 elements) from src to dst; both 16-byte aligned.
template <typename T>
MTNLG_HD void copy16(T* dst, const T* src) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
#else
  std::memcpy(static_cast<void*>(dst), static_cast<const void*>(src), 16);
#endif
}
template <typename T>
MTNLG_HD void zero16(T* dst) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
#else
  std::memset(static_cast<void*>(dst), 0, 16);
#endif
}

// Dropout's element index of (i, j) of head h of sequence b: the CPU's.
MTNLG_HD uint64_t drop_index(const Dims& d, int64_t b, int64_t h, int64_t i, int64_t j) {
  return static_cast<uint64_t>(((b * d.heads + h) * d.s + i) * d.s + j);
}

}  // namespace mtnlg::kernels::flash
