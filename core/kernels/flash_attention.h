// Flash-style causal attention (Dao et al. 2022, 2023): the program one thread block runs, written
// once for two executors. On a GPU (core/cuda/flash_attention_cuda.cu) the products run on tensor
// cores through wmma and the phases are separated by __syncthreads; on the CPU
// (tests/core/flash_attention_test.cc) an emulator runs the same program phase by phase, thread
// by thread, so that CI checks its indexing, masks, ragged tiles, online softmax, dropout
// indices and backward algebra against the CPU backend without a GPU.
//
// Contract (core/backend.h): qkv [b, s, heads*3*hd] with head h's q, k, v at columns
// h*3*hd + {0, hd, 2hd}; out [b, s, heads*hd]; stats [b, heads, s] each row's log-sum-exp of
// its scaled scores; dropout keeps element ((b*heads + h)*s + i)*s + j with core/rng.h's
// dropout_keep, the CPU's index. Nothing of size [s, s] is ever stored: a block keeps one tile
// of scores in shared memory.
//
// An executor E provides:
//   E::threads(f)  runs f(t) for every thread t in [0, kThreads), then a barrier. Between two
//                  barriers a thread may write only what no other thread reads or writes in
//                  that phase (the emulator runs threads in either order to check it).
//   E::mma<kArow, kBrow>(c, ldc, a, lda, b, ldb, m, n, k, accumulate)
//                  c[m][n] (fp32, row-major) = (accumulate ? c : 0) + A[m][k] B[k][n], A and B
//                  in T (bf16/fp16), row-major when kArow/kBrow, else column-major (A(i, l) at
//                  a[l*lda + i]); m, n, k multiples of 16, then a barrier.
//   Accumulators, for a sum that several products add into (forward's O, dq, dk, dv): slot
//   kSlot (0 or 1) is c[m][n] fp32 at home c (leading dimension ldc), which the executor may
//   hold elsewhere (the GPU: in the warps' registers) from zero to flush; home is written by
//   flush and must not be read or written in between. Each call is followed by a barrier.
//     E::zero<kSlot>(c, ldc, m, n)                      c = 0
//     E::scale_rows<kSlot>(c, ldc, m, n, alpha)         c[i][*] *= alpha[i] (alpha in shared
//                                                       memory, written before the call)
//     E::mma_acc<kArow, kBrow, kSlot>(c, ldc, a, lda, b, ldb, m, n, k)   c += A B, as mma
//     E::flush<kSlot>(c, ldc, m, n)                     home = c
// All are called by every thread: the control flow below is uniform across the block.
//
// Backward is two passes, deterministic (no atomics): dq per query-row block, which also
// writes delta_i = dO_i . O_i for the second pass, then dk and dv per key-row block. Both
// recompute the probabilities from the scores and forward's log-sum-exp.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/hostdevice.h"
#include "core/kernels/dropout_math.h"
#include "core/rng.h"

namespace mtnlg::kernels::flash {

constexpr int kThreads = 256;
constexpr int kRows = 64;                  // query rows of a tile
constexpr int kCols = 64;                  // key columns of a forward or dq tile
constexpr int kKeyRows = 32;               // key rows of a dk/dv block
constexpr int kPerRow = kThreads / kRows;  // threads that share a query row (RowRun)
static_assert(kRows * kPerRow == kThreads && kCols % kPerRow == 0 && kKeyRows % kPerRow == 0,
              "every thread runs one row's equal share of a tile's keys");
static_assert(kKeyRows / kPerRow <= 8, "a dk/dv thread's keep decisions fit a byte");
constexpr int kMaxHeadDim = 256;  // head sizes: multiples of 16 up to this, as shared memory allows

struct Dims {
  int64_t b, s, heads, hd;
  MTNLG_HD int64_t ldq() const { return heads * 3 * hd; }
  MTNLG_HD int64_t ldo() const { return heads * hd; }
};

// Whether the kernels take this head size (shared memory permitting: *_smem_bytes).
MTNLG_HD bool head_dim_supported(int64_t hd) {
  return hd > 0 && hd % 16 == 0 && hd <= kMaxHeadDim;
}

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
  float* delta;  // [b, heads, s]: written by the dq pass, read by the dk/dv pass
  T* dqkv;
  Dims d;
  float scale, dropout_p, drop_scale;
  RngStream rng;
  // The FA2-style backward with dropout (core/kernels/flash2_backward.h): the keep decisions,
  // written as bits by its first pass and read by its second; unused by these kernels.
  uint32_t* keep = nullptr;
  // The FA2-style backward with dS stored (flash2_backward.h, dq_stored_thread): dS^T [b, heads,
  // s, ld_ds], written by the dk/dv pass and read by the dq pass; null: dq recomputes dS.
  T* ds = nullptr;
  int64_t ld_ds = 0;
};

// Shared memory carved in 128-byte pieces (wmma wants 32-byte aligned tiles) from `base` (0:
// only the size is wanted).
struct Carve {
  uintptr_t base = 0;
  size_t bytes = 0;
  template <typename U>
  MTNLG_HD U* take(int64_t n) {
    U* at = reinterpret_cast<U*>(base + bytes);
    bytes = (bytes + static_cast<size_t>(n) * sizeof(U) + 127) / 128 * 128;
    return at;
  }
};

// Leading dimensions of a block's tiles: the model-dtype [rows, hd] operands (ldt), the fp32
// [rows, cols] scores (lds), their model-dtype copies (ldp) and the fp32 [rows, hd] accumulators
// (ldo). Padded past the tile (by 16 bytes) so that rows start in different banks.
struct Leads {
  int ldt, lds, ldp, ldo;
  MTNLG_HD Leads(int64_t hd, int cols)
      : ldt(static_cast<int>(hd) + 8),
        lds(cols + 4),
        ldp(cols + 8),
        ldo(static_cast<int>(hd) + 4) {}
};

// Each program's tiles in shared memory at `base` (0: for the size only).
template <typename T>
struct ForwardSmem : Leads {
  T *q, *k, *v, *p;
  float *s, *o, *m, *l, *alpha, *red, *red2;
  size_t bytes;
  MTNLG_HD explicit ForwardSmem(int64_t hd, char* base = nullptr) : Leads(hd, kCols) {
    Carve c{reinterpret_cast<uintptr_t>(base)};
    q = c.take<T>(kRows * ldt);
    k = c.take<T>(kCols * ldt);
    v = c.take<T>(kCols * ldt);
    s = c.take<float>(kRows * lds);
    p = c.take<T>(kRows * ldp);
    o = c.take<float>(kRows * ldo);
    m = c.take<float>(kRows);
    l = c.take<float>(kRows);
    alpha = c.take<float>(kRows);
    red = c.take<float>(kThreads);
    red2 = c.take<float>(kThreads);
    bytes = c.bytes;
  }
};

template <typename T>
struct DqSmem : Leads {
  T *q, *dout, *k, *v, *p;
  float *s, *dq, *lse, *delta, *red;
  size_t bytes;
  MTNLG_HD explicit DqSmem(int64_t hd, char* base = nullptr) : Leads(hd, kCols) {
    Carve c{reinterpret_cast<uintptr_t>(base)};
    q = c.take<T>(kRows * ldt);
    dout = c.take<T>(kRows * ldt);
    k = c.take<T>(kCols * ldt);
    v = c.take<T>(kCols * ldt);
    s = c.take<float>(kRows * lds);
    p = c.take<T>(kRows * ldp);
    dq = c.take<float>(kRows * ldo);
    lse = c.take<float>(kRows);
    delta = c.take<float>(kRows);
    red = c.take<float>(kThreads);
    bytes = c.bytes;
  }
};

template <typename T>
struct DkvSmem : Leads {
  T *k, *v, *q, *dout, *pd, *ds;
  float *s, *dk, *dv, *lse, *delta;
  uint8_t* kept;  // [kThreads]: each thread's keep decisions for its RowRun (bit j - j0)
  size_t bytes;
  MTNLG_HD explicit DkvSmem(int64_t hd, char* base = nullptr) : Leads(hd, kKeyRows) {
    Carve c{reinterpret_cast<uintptr_t>(base)};
    k = c.take<T>(kKeyRows * ldt);
    v = c.take<T>(kKeyRows * ldt);
    q = c.take<T>(kRows * ldt);
    dout = c.take<T>(kRows * ldt);
    s = c.take<float>(kRows * lds);
    pd = c.take<T>(kRows * ldp);
    ds = c.take<T>(kRows * ldp);
    dk = c.take<float>(kKeyRows * ldo);
    dv = c.take<float>(kKeyRows * ldo);
    lse = c.take<float>(kRows);
    delta = c.take<float>(kRows);
    kept = c.take<uint8_t>(kThreads);
    bytes = c.bytes;
  }
};

template <typename T>
MTNLG_HD size_t forward_smem_bytes(int64_t hd) {
  return ForwardSmem<T>(hd).bytes;
}
// The larger of the two backward passes'.
template <typename T>
MTNLG_HD size_t backward_smem_bytes(int64_t hd) {
  const size_t a = DqSmem<T>(hd).bytes, b = DkvSmem<T>(hd).bytes;
  return a > b ? a : b;
}

// Blocks of each pass along the sequence.
MTNLG_HD int64_t query_blocks(int64_t s) {
  return (s + kRows - 1) / kRows;
}
MTNLG_HD int64_t key_blocks(int64_t s) {
  return (s + kKeyRows - 1) / kKeyRows;
}

// How a warp covers its 16 x 16 output tiles of an [m, n] product on the GPU. The tiles are
// numbered row-major and dealt round-robin: warp w of `warps` takes tiles w, w + warps, ...
// When the tile columns divide the warps, or the warps the tile columns, a warp's tiles form a
// grid: `rows` tile rows row0 + r * row_step by `cols` tile columns col0 + c * col_step. Then each
// k step loads one A fragment per tile row and one B fragment per tile column (rows + cols
// fragments from shared memory instead of 2 x rows x cols), keeping every tile's accumulator in
// registers; the products, and their order along k, are the same. grid false: no such grid
// within kGridMaxRows x kGridMaxCols (the register budget); the tiles go one by one.
constexpr int kGridMaxRows = 4;
constexpr int kGridMaxCols = 1;

struct WarpGrid {
  bool grid = false;
  int rows = 0, row0 = 0, row_step = 1;
  int cols = 0, col0 = 0, col_step = 1;
};

MTNLG_HD WarpGrid warp_grid(int warp, int warps, int m, int n) {
  const int tile_rows = m / 16, tile_cols = n / 16;
  WarpGrid g;
  if (tile_cols % warps == 0) {
    // Tiles w + q * warps: row q / (tile_cols / warps), column w + (q mod that) * warps.
    g.rows = tile_rows;
    g.cols = tile_cols / warps;
    g.col0 = warp;
    g.col_step = warps;
  } else if (warps % tile_cols == 0) {
    // One column, w mod tile_cols; rows w / tile_cols + q * (warps / tile_cols).
    g.cols = 1;
    g.col0 = warp % tile_cols;
    g.row0 = warp / tile_cols;
    g.row_step = warps / tile_cols;
    g.rows = g.row0 < tile_rows ? (tile_rows - g.row0 + g.row_step - 1) / g.row_step : 0;
  } else {
    return g;
  }
  g.grid = g.rows <= kGridMaxRows && g.cols <= kGridMaxCols;
  return g;
}

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

// Thread t's share of loading rows [row0, row0 + rows) of a [s, hd] operand (row stride ld_src)
// into a tile of leading dimension ld; rows past s are zeros.
template <typename T>
MTNLG_HD void load_rows(int t, T* dst, int ld, const T* src, int64_t ld_src, int64_t row0, int rows,
                        int64_t s, int64_t hd) {
  const int vecs = static_cast<int>(hd / 8);
  for (int e = t; e < rows * vecs; e += kThreads) {
    const int r = e / vecs, c = (e % vecs) * 8;
    const int64_t i = row0 + r;
    if (i < s)
      copy16(dst + r * ld + c, src + i * ld_src + c);
    else
      zero16(dst + r * ld + c);
  }
}

// Whether query row i sees key j (causal, both inside the sequence).
MTNLG_HD bool visible(int64_t i, int64_t j, int64_t s) {
  return j <= i && i < s;
}

MTNLG_HD uint64_t drop_index(const Dims& d, int64_t b, int64_t h, int64_t i, int64_t j) {
  return static_cast<uint64_t>(((b * d.heads + h) * d.s + i) * d.s + j);
}

// v as forward's dropout left element (i, j) of head h of sequence b: scaled when kept, 0 when
// dropped (v itself without dropout). `mask` is the calling thread's, for a.rng: walking a row's
// keys in order, it draws one Philox block per four of them (kernels::KeepMask).
template <typename Args>
MTNLG_HD float dropped(const Args& a, KeepMask& mask, int64_t b, int64_t h, int64_t i, int64_t j,
                       float v) {
  if (!(a.dropout_p > 0.0f)) return v;
  return mask.keep(drop_index(a.d, b, h, i, j)) ? v * a.drop_scale : 0.0f;
}

// Thread t's run of a [kRows, cols] tile: row t / kPerRow, its cols / kPerRow consecutive keys
// from (t % kPerRow) * cols / kPerRow (consecutive, so that its dropout draws serve four keys
// each).
struct RowRun {
  int r, j0, j1;
  MTNLG_HD RowRun(int t, int cols)
      : r(t / kPerRow), j0(t % kPerRow * (cols / kPerRow)), j1(j0 + cols / kPerRow) {}
};

MTNLG_HD float fmax_(float a, float b) {
  return a > b ? a : b;
}

// The softmax gradient of a tile of query rows [r0, r0 + kRows) and keys [c0, c0 + cols), in
// place of its probabilities p (model dtype): ds = p * (dP as forward's dropout left it - delta_i)
// with dP (fp32) the gradient of the dropped probabilities; 0 where row i does not see key j.
// Each element is read and written by one thread (its RowRun). kept: null, draw the dropout
// decisions; else each thread's decisions for its run, as an earlier phase of the same tile
// recorded them (bit j - j0 of kept[t], for the keys the row sees).
template <typename T, typename E, typename Args>
MTNLG_HD void softmax_grad_tile(E& ex, const Args& a, int64_t b, int64_t h, int64_t r0, int64_t c0,
                                int cols, const float* dp, int lds, T* p, int ldp,
                                const float* delta, const uint8_t* kept = nullptr) {
  ex.threads([&](int t) {
    const RowRun run(t, cols);
    const int r = run.r;
    const int64_t i = r0 + r;
    KeepMask mask(a.rng, a.dropout_p);
    for (int j = run.j0; j < run.j1; ++j) {
      float ds = 0.0f;
      if (visible(i, c0 + j, a.d.s)) {
        float d = dp[r * lds + j];
        if (kept == nullptr)
          d = dropped(a, mask, b, h, i, c0 + j, d);
        else if (a.dropout_p > 0.0f)
          d = (kept[t] >> (j - run.j0)) & 1u ? d * a.drop_scale : 0.0f;
        ds = static_cast<float>(p[r * ldp + j]) * (d - delta[r]);
      }
      p[r * ldp + j] = static_cast<T>(ds);
    }
  });
}

// Forward for query rows [rb*kRows, rb*kRows + kRows) of head h of sequence b: online softmax
// over key tiles [0, end of the block), out and lse written for rows inside the sequence.
template <typename T, typename E>
MTNLG_HD void forward_block(E& ex, char* smem, const ForwardArgs<T>& a, int64_t b, int64_t h,
                            int64_t rb) {
  const ForwardSmem<T> L(a.d.hd, smem);
  const Dims d = a.d;
  const int hd = static_cast<int>(d.hd);
  const int64_t s = d.s, ldq = d.ldq(), r0 = rb * kRows;
  const T* base = a.qkv + b * s * ldq + h * 3 * d.hd;
  const float neg_inf = -INFINITY;

  ex.threads([&](int t) {
    load_rows(t, L.q, L.ldt, base, ldq, r0, kRows, s, d.hd);
    if (t < kRows) {
      L.m[t] = neg_inf;
      L.l[t] = 0.0f;
    }
  });
  ex.template zero<0>(L.o, L.ldo, kRows, hd);
  const int64_t end = r0 + kRows < s ? r0 + kRows : s;  // keys the block's rows can see
  for (int64_t c0 = 0; c0 < end; c0 += kCols) {
    ex.threads([&](int t) {
      load_rows(t, L.k, L.ldt, base + d.hd, ldq, c0, kCols, s, d.hd);
      load_rows(t, L.v, L.ldt, base + 2 * d.hd, ldq, c0, kCols, s, d.hd);
    });
    ex.template mma<true, false>(L.s, L.lds, L.q, L.ldt, L.k, L.ldt, kRows, kCols, hd, false);
    // Scaled, masked scores in place (masked: -inf); each thread's partial row maximum.
    ex.threads([&](int t) {
      const RowRun run(t, kCols);
      const int r = run.r;
      float mx = neg_inf;
      for (int j = run.j0; j < run.j1; ++j) {
        float& x = L.s[r * L.lds + j];
        x = visible(r0 + r, c0 + j, s) ? x * a.scale : neg_inf;
        mx = fmax_(mx, x);
      }
      L.red[t] = mx;
    });
    // The row's new maximum; probabilities against it (dropped ones zeroed and the kept scaled,
    // as T for the product with V).
    ex.threads([&](int t) {
      const RowRun run(t, kCols);
      const int r = run.r;
      const int64_t i = r0 + r;
      float mnew = L.m[r];
      for (int q = 0; q < kPerRow; ++q) mnew = fmax_(mnew, L.red[r * kPerRow + q]);
      float sum = 0.0f;
      KeepMask mask(a.rng, a.dropout_p);
      for (int j = run.j0; j < run.j1; ++j) {
        const float x = L.s[r * L.lds + j];
        const float p = x == neg_inf ? 0.0f : expf(x - mnew);
        sum += p;
        L.p[r * L.ldp + j] =
            static_cast<T>(p != 0.0f ? dropped(a, mask, b, h, i, c0 + j, p) : 0.0f);
      }
      L.red2[t] = sum;
    });
    // The row's running sum and maximum, and the factor that takes O to the new maximum.
    ex.threads([&](int t) {
      if (t >= kRows) return;
      float mnew = L.m[t];
      for (int q = 0; q < kPerRow; ++q) mnew = fmax_(mnew, L.red[t * kPerRow + q]);
      const float alpha = L.m[t] == neg_inf ? 0.0f : expf(L.m[t] - mnew);
      float sum = 0.0f;
      for (int q = 0; q < kPerRow; ++q) sum += L.red2[t * kPerRow + q];
      L.l[t] = L.l[t] * alpha + sum;
      L.m[t] = mnew;
      L.alpha[t] = alpha;
    });
    ex.template scale_rows<0>(L.o, L.ldo, kRows, hd, L.alpha);
    ex.template mma_acc<true, true, 0>(L.o, L.ldo, L.p, L.ldp, L.v, L.ldt, kRows, hd, kCols);
  }
  ex.template flush<0>(L.o, L.ldo, kRows, hd);
  T* out = a.out + b * s * d.ldo() + h * d.hd;
  ex.threads([&](int t) {
    for (int e = t; e < kRows * hd; e += kThreads) {
      const int r = e / hd, c = e % hd;
      if (r0 + r < s) out[(r0 + r) * d.ldo() + c] = static_cast<T>(L.o[r * L.ldo + c] / L.l[r]);
    }
    if (t < kRows && r0 + t < s) a.lse[(b * d.heads + h) * s + r0 + t] = L.m[t] + logf(L.l[t]);
  });
}

// Backward's first pass, for query rows [rb*kRows, ...): delta_i = dO_i . O_i (kept for the
// second pass), then dq_i = scale * sum_j ds_ij k_j with ds = p * (dp - delta).
template <typename T, typename E>
MTNLG_HD void dq_block(E& ex, char* smem, const BackwardArgs<T>& a, int64_t b, int64_t h,
                       int64_t rb) {
  const DqSmem<T> L(a.d.hd, smem);
  const Dims d = a.d;
  const int hd = static_cast<int>(d.hd);
  const int64_t s = d.s, ldq = d.ldq(), ldo = d.ldo(), r0 = rb * kRows;
  const T* base = a.qkv + b * s * ldq + h * 3 * d.hd;
  const T* dout = a.dout + b * s * ldo + h * d.hd;
  const T* out = a.out + b * s * ldo + h * d.hd;
  const int64_t row_stat = (b * d.heads + h) * s;

  ex.threads([&](int t) {
    load_rows(t, L.q, L.ldt, base, ldq, r0, kRows, s, d.hd);
    load_rows(t, L.dout, L.ldt, dout, ldo, r0, kRows, s, d.hd);
    // This thread's part of dO_i . O_i, from global memory in the model dtype.
    const int r = t / kPerRow, part = t % kPerRow, span = hd / kPerRow;
    float dot = 0.0f;
    if (r0 + r < s)
      for (int c = part * span; c < (part + 1) * span; ++c)
        dot += static_cast<float>(dout[(r0 + r) * ldo + c]) *
               static_cast<float>(out[(r0 + r) * ldo + c]);
    L.red[t] = dot;
    if (t < kRows) L.lse[t] = r0 + t < s ? a.lse[row_stat + r0 + t] : 0.0f;
  });
  ex.threads([&](int t) {
    if (t >= kRows) return;
    float dot = 0.0f;
    for (int q = 0; q < kPerRow; ++q) dot += L.red[t * kPerRow + q];
    L.delta[t] = dot;
    if (r0 + t < s) a.delta[row_stat + r0 + t] = dot;
  });
  ex.template zero<0>(L.dq, L.ldo, kRows, hd);
  const int64_t end = r0 + kRows < s ? r0 + kRows : s;
  for (int64_t c0 = 0; c0 < end; c0 += kCols) {
    ex.threads([&](int t) {
      load_rows(t, L.k, L.ldt, base + d.hd, ldq, c0, kCols, s, d.hd);
      load_rows(t, L.v, L.ldt, base + 2 * d.hd, ldq, c0, kCols, s, d.hd);
    });
    ex.template mma<true, false>(L.s, L.lds, L.q, L.ldt, L.k, L.ldt, kRows, kCols, hd, false);
    // Forward's probabilities, as T (the softmax backward's operand, as the blocked kernel's).
    ex.threads([&](int t) {
      for (int e = t; e < kRows * kCols; e += kThreads) {
        const int r = e / kCols, j = e % kCols;
        const bool vis = visible(r0 + r, c0 + j, s);
        L.p[r * L.ldp + j] =
            static_cast<T>(vis ? expf(L.s[r * L.lds + j] * a.scale - L.lse[r]) : 0.0f);
      }
    });
    // dP of the dropped probabilities, over the scores.
    ex.template mma<true, false>(L.s, L.lds, L.dout, L.ldt, L.v, L.ldt, kRows, kCols, hd, false);
    softmax_grad_tile(ex, a, b, h, r0, c0, kCols, L.s, L.lds, L.p, L.ldp, L.delta);
    ex.template mma_acc<true, true, 0>(L.dq, L.ldo, L.p, L.ldp, L.k, L.ldt, kRows, hd, kCols);
  }
  ex.template flush<0>(L.dq, L.ldo, kRows, hd);
  T* dq = a.dqkv + b * s * ldq + h * 3 * d.hd;
  ex.threads([&](int t) {
    for (int e = t; e < kRows * hd; e += kThreads) {
      const int r = e / hd, c = e % hd;
      if (r0 + r < s) dq[(r0 + r) * ldq + c] = static_cast<T>(L.dq[r * L.ldo + c] * a.scale);
    }
  });
}

// Backward's second pass, for key rows [kb*kKeyRows, ...): over the query tiles at and below
// them, dv_j = sum_i pd_ij dO_i and dk_j = scale * sum_i ds_ij q_i. Needs the first pass's delta.
template <typename T, typename E>
MTNLG_HD void dkv_block(E& ex, char* smem, const BackwardArgs<T>& a, int64_t b, int64_t h,
                        int64_t kb) {
  const DkvSmem<T> L(a.d.hd, smem);
  const Dims d = a.d;
  const int hd = static_cast<int>(d.hd);
  const int64_t s = d.s, ldq = d.ldq(), ldo = d.ldo(), c0 = kb * kKeyRows;
  const T* base = a.qkv + b * s * ldq + h * 3 * d.hd;
  const T* dout = a.dout + b * s * ldo + h * d.hd;
  const int64_t row_stat = (b * d.heads + h) * s;

  ex.threads([&](int t) {
    load_rows(t, L.k, L.ldt, base + d.hd, ldq, c0, kKeyRows, s, d.hd);
    load_rows(t, L.v, L.ldt, base + 2 * d.hd, ldq, c0, kKeyRows, s, d.hd);
  });
  ex.template zero<0>(L.dk, L.ldo, kKeyRows, hd);
  ex.template zero<1>(L.dv, L.ldo, kKeyRows, hd);
  for (int64_t r0 = c0 / kRows * kRows; r0 < s; r0 += kRows) {
    ex.threads([&](int t) {
      load_rows(t, L.q, L.ldt, base, ldq, r0, kRows, s, d.hd);
      load_rows(t, L.dout, L.ldt, dout, ldo, r0, kRows, s, d.hd);
      if (t < kRows) {
        L.lse[t] = r0 + t < s ? a.lse[row_stat + r0 + t] : 0.0f;
        L.delta[t] = r0 + t < s ? a.delta[row_stat + r0 + t] : 0.0f;
      }
    });
    ex.template mma<true, false>(L.s, L.lds, L.q, L.ldt, L.k, L.ldt, kRows, kKeyRows, hd, false);
    // p (as T, over ds's tile until ds replaces it) and the dropped p for dv.
    // The keep decisions go to L.kept for the softmax gradient below (one draw per element).
    ex.threads([&](int t) {
      const RowRun run(t, kKeyRows);
      const int r = run.r;
      const int64_t i = r0 + r;
      KeepMask mask(a.rng, a.dropout_p);
      uint32_t kept = 0;
      for (int j = run.j0; j < run.j1; ++j) {
        float p = 0.0f, pd = 0.0f;
        if (visible(i, c0 + j, s)) {
          p = expf(L.s[r * L.lds + j] * a.scale - L.lse[r]);
          const bool keep = !(a.dropout_p > 0.0f) || mask.keep(drop_index(a.d, b, h, i, c0 + j));
          pd = keep ? (a.dropout_p > 0.0f ? p * a.drop_scale : p) : 0.0f;
          kept |= static_cast<uint32_t>(keep) << (j - run.j0);
        }
        L.ds[r * L.ldp + j] = static_cast<T>(p);
        L.pd[r * L.ldp + j] = static_cast<T>(pd);
      }
      L.kept[t] = static_cast<uint8_t>(kept);
    });
    ex.template mma_acc<false, true, 1>(L.dv, L.ldo, L.pd, L.ldp, L.dout, L.ldt, kKeyRows, hd,
                                        kRows);
    ex.template mma<true, false>(L.s, L.lds, L.dout, L.ldt, L.v, L.ldt, kRows, kKeyRows, hd, false);
    softmax_grad_tile(ex, a, b, h, r0, c0, kKeyRows, L.s, L.lds, L.ds, L.ldp, L.delta, L.kept);
    ex.template mma_acc<false, true, 0>(L.dk, L.ldo, L.ds, L.ldp, L.q, L.ldt, kKeyRows, hd, kRows);
  }
  ex.template flush<0>(L.dk, L.ldo, kKeyRows, hd);
  ex.template flush<1>(L.dv, L.ldo, kKeyRows, hd);
  T* dk = a.dqkv + b * s * ldq + h * 3 * d.hd + d.hd;
  ex.threads([&](int t) {
    for (int e = t; e < kKeyRows * hd; e += kThreads) {
      const int r = e / hd, c = e % hd;
      if (c0 + r < s) {
        dk[(c0 + r) * ldq + c] = static_cast<T>(L.dk[r * L.ldo + c] * a.scale);
        dk[(c0 + r) * ldq + d.hd + c] = static_cast<T>(L.dv[r * L.ldo + c]);
      }
    }
  });
}

}  // namespace mtnlg::kernels::flash
