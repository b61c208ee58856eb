// Causal self-attention in bf16 on the CPU: its four kinds of products run as bf16 GEMMs
// (oneDNN, fp32 sums) batched over (batch, head) problems, as Megatron's bf16 attention does on a
// GPU; the softmax and its backward run in fp32 between them.
//
// Why not the fp32 path (attention_cpu.cc) on widened copies: its products ran at fp32 BLAS rates,
// and attention was 21% of a GPT-2 124M iteration in bf16. oneDNN 2.6 cannot take the
// interleaved [b, s, heads*3*hd] layout as a batch (it crashes creating the primitive), so each
// problem's q, k, v (and dout) are first staged densely as [problem, s, hd]: 2 bytes an element,
// cheap beside the products.
//
// Causality: rows are taken in blocks (kBlockRows with oneDNN, kFallbackBlockRows without); rows
// [i0, i1) need key columns [0, i1) only.
// Rounding (Megatron's): the probabilities are rounded to bf16 (after dropout, rounded again)
// to multiply v; the softmax gradient ds is rounded to bf16 before its two products; scores,
// outputs and the q, k, v gradients are fp32 sums rounded once on write.
// Saved: each row's log-sum-exp (fp32). Backward recomputes a row block's scores with the same
// GEMM and its probabilities as exp(score - lse), in fp32 for the softmax backward, rounded as
// forward rounded them for dv.
//
// Memory: the scratch is sized per problem (staged inputs, fp32 accumulators, one row block's
// scores) and problems are taken in chunks that keep it under scratch_bytes (one at least).
// Determinism: every row kernel's work is fixed per row; the GEMMs are oneDNN's (tests compare 1
// and 2 threads bit for bit).
//
// Where oneDNN has no bf16 matmul (AVX2 CPUs), each thread takes whole problems, as the fp32 path
// does (a row block's scores stay in its cache instead of every problem's block passing through
// memory between the products and the softmax), with the operands staged widened to fp32
// (exact) and the rounded probabilities and ds kept as fp32 holding bf16 values: the same fp32
// GEMM calls MatmulBf16's fallback makes for the batched products, bit for bit
// (mixed_kernels_test), without re-widening k and v for every row block. Measured on an AVX2
// EPYC: backward 9.5 -> 8.6 ms an iteration of the demo (docs/bf16-without-avx512.md).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu/attention_bf16.h"
#include "core/cpu/attention_rows.h"
#include "core/cpu/kernels_cpu.h"

namespace mtnlg::cpu {
namespace {

constexpr int64_t kBlockRows = 128;
// Without oneDNN, the fp32 path's blocks: a 512-key row block's scores and gradients stay in a
// core's L2 (GPT-2's backward 5% faster than with 128 on an AVX2 EPYC, the demo's 10%).
constexpr int64_t kFallbackBlockRows = 64;

// Where rows of (batch, head) problems live in a [b, s, heads*width] tensor: row i of problem
// bh = bi*heads + h starts at ((bi*s + i)*heads + h)*width + off.
struct HeadLayout {
  int64_t s, heads, width;
  int64_t at(int64_t bh, int64_t i, int64_t off) const {
    return ((bh / heads * s + i) * heads + bh % heads) * width + off;
  }
};

// What the products read, and how they run. Bf16Operands: bf16 bits, oneDNN's batched bf16
// matmul. F32Operands (no bf16 matmul on this CPU): the same values widened to fp32, one fp32 GEMM
// per problem on the problems' threads (as MatmulBf16's fallback runs a batch).
struct Bf16Operands {
  using E = uint16_t;
  MatmulBf16* mm;
  static void put(E* dst, const Bf16* src, int64_t n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(E));
  }
  static void put_rounded(E* dst, const float* src, int64_t n) {
    narrow(reinterpret_cast<Bf16*>(dst), src, n);
  }
  static float value(E x) { return bf16_to_f32(x); }
  static E rounded(float x) { return f32_to_bf16(x); }
  void run(const Bf16Gemm& g) const { mm->run(g); }
};

struct F32Operands {
  using E = float;
  static void put(E* dst, const Bf16* src, int64_t n) { widen(dst, src, n); }
  static void put_rounded(E* dst, const float* src, int64_t n) { round_to_bf16(dst, src, n); }
  static float value(E x) { return x; }
  static E rounded(float x) { return bf16_to_f32(f32_to_bf16(x)); }
  // g's pointers hold fp32 operands (cast through the bf16 description's types).
  static void run(const Bf16Gemm& g) {
    const auto* a = reinterpret_cast<const float*>(g.a);
    const auto* b = reinterpret_cast<const float*>(g.b);
    auto* c = static_cast<float*>(g.c);
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
    for (int64_t i = 0; i < g.batch; ++i)
      gemm_serial(c + i * g.stride_c, g.ld_c, a + i * g.stride_a, g.ld_a, g.trans_a,
                  b + i * g.stride_b, g.ld_b, g.trans_b, g.m, g.n, g.k, g.alpha, g.beta);
  }
};

// The description of a product over staged operands of either kind (the element pointers are
// carried as bf16 bits; F32Operands::run reads them back as fp32).
template <class E>
const uint16_t* op(const E* p) {
  return reinterpret_cast<const uint16_t*>(p);
}

// dst [np, s, hd] (dense) = the hd-wide column block at `off` of problems p0.. of `src`.
template <class Ops>
void stage(typename Ops::E* dst, const Bf16* src, const HeadLayout& lay, int64_t off, int64_t p0,
           int64_t np, int64_t hd) {
  const int64_t rows = np * lay.s;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    Ops::put(dst + r * hd, src + lay.at(p0 + r / lay.s, r % lay.s, off), hd);
}

// The reverse, rounding fp32 to bf16: src [np, s, hd] dense into problems p0.. of `dst`.
void unstage(Bf16* dst, const float* src, const HeadLayout& lay, int64_t off, int64_t p0,
             int64_t np, int64_t hd) {
  const int64_t rows = np * lay.s;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    narrow(dst + lay.at(p0 + r / lay.s, r % lay.s, off), src + r * hd, hd);
}

// The chunk of problems whose scratch fits `budget` bytes (one at least).
int64_t chunk_of(int64_t problems, int64_t bytes_per_problem, int64_t budget) {
  return std::clamp<int64_t>(budget / std::max<int64_t>(bytes_per_problem, 1), 1, problems);
}

// The block product both passes start with: c[p, 0:m, 0:n] (dense fp32) = alpha * x[p, i0:i0+m]
// y[p, 0:n]^T, x and y staged [np, s, hd] (scores from q and k; dp from dout and v).
template <class E>
Bf16Gemm rows_by_keys(const E* x, const E* y, float* c, int64_t np, int64_t s, int64_t hd,
                      int64_t i0, int64_t m, int64_t n, float alpha) {
  return {.batch = np,
          .m = m,
          .n = n,
          .k = hd,
          .a = op(x + i0 * hd),
          .ld_a = hd,
          .stride_a = s * hd,
          .b = op(y),
          .ld_b = hd,
          .stride_b = s * hd,
          .trans_b = true,
          .c = c,
          .ld_c = n,
          .stride_c = m * n,
          .alpha = alpha};
}

// The row's probabilities as they multiply v, rounded: bf16(p), or with dropout
// bf16(bf16(p) * keep / (1 - dropout)); zeros past column i up to n. Forward and backward both
// take them from here.
template <class Ops>
void probs_operand_row(typename Ops::E* dst, const float* p, int64_t i, int64_t n, bool drop,
                       KeepMask& mask, uint64_t base, float drop_scale) {
  Ops::put_rounded(dst, p, n);
  if (!drop) return;
  for (int64_t j = 0; j <= i; ++j)
    dst[j] =
        mask.keep(base + j) ? Ops::rounded(Ops::value(dst[j]) * drop_scale) : typename Ops::E{0};
}

}  // namespace

namespace {

template <class Ops>
void forward(const Ops& ops, Bf16* out, float* stats, const Bf16* qkv, int64_t first, int64_t last,
             int64_t s, int64_t heads, int64_t hd, float dropout_p, RngStream rng,
             int64_t scratch_bytes, int64_t block_rows) {
  using E = typename Ops::E;
  constexpr int64_t es = sizeof(E);
  const HeadLayout in{s, heads, 3 * hd}, ol{s, heads, hd};
  const int64_t problems = last - first, rb = std::min(block_rows, s);
  const bool drop = dropout_p > 0;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float drop_scale = drop ? kernels::dropout_scale(dropout_p) : 1.0f;
  const int64_t per_problem = 3 * s * hd * es + rb * hd * 4 + rb * s * (4 + es);
  const int64_t chunk = chunk_of(problems, per_problem, scratch_bytes);
  const int64_t staged = chunk * s * hd, block = chunk * rb * s;
  const ScratchPieces scratch(
      {es * staged, es * staged, es * staged, 4 * chunk * rb * hd, 4 * block, es * block});
  auto* const q = scratch.get<E>(0);
  auto* const k = scratch.get<E>(1);
  auto* const v = scratch.get<E>(2);
  auto* const o = scratch.get<float>(3);
  auto* const sc = scratch.get<float>(4);
  auto* const pv_op = scratch.get<E>(5);

  for (int64_t p0 = first; p0 < last; p0 += chunk) {
    const int64_t np = std::min(chunk, last - p0);
    stage<Ops>(q, qkv, in, 0, p0, np, hd);
    stage<Ops>(k, qkv, in, hd, p0, np, hd);
    stage<Ops>(v, qkv, in, 2 * hd, p0, np, hd);
    for (int64_t i0 = 0; i0 < s; i0 += rb) {
      const int64_t i1 = std::min(s, i0 + rb), m = i1 - i0, n = i1;
      // sc[p, 0:m, 0:n] = scale * q[p, i0:i1] k[p, 0:n]^T
      ops.run(rows_by_keys(q, k, sc, np, s, hd, i0, m, n, scale));
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < np * m; ++r) {
        const int64_t p = r / m, i = i0 + r % m, bh = p0 + p;
        float* row = sc + r * n;
        stats[bh * s + i] = causal_softmax_row_lse(row, i, n);
        KeepMask mask(rng, dropout_p);
        probs_operand_row<Ops>(pv_op + r * n, row, i, n, drop, mask,
                               static_cast<uint64_t>((bh * s + i) * s), drop_scale);
      }
      // o[p, 0:m] = pd[p, i0:i1, 0:n] v[p, 0:n]
      ops.run({.batch = np,
               .m = m,
               .n = hd,
               .k = n,
               .a = op(pv_op),
               .ld_a = n,
               .stride_a = m * n,
               .b = op(v),
               .ld_b = hd,
               .stride_b = s * hd,
               .c = o,
               .ld_c = hd,
               .stride_c = m * hd});
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < np * m; ++r) {
        const int64_t p = r / m, i = i0 + r % m;
        narrow(out + ol.at(p0 + p, i, 0), o + r * hd, hd);
      }
    }
  }
}

template <class Ops>
void backward(const Ops& ops, Bf16* dqkv, const Bf16* dout, const Bf16* qkv, const float* stats,
              int64_t first, int64_t last, int64_t s, int64_t heads, int64_t hd, float dropout_p,
              RngStream rng, int64_t scratch_bytes, int64_t block_rows) {
  using E = typename Ops::E;
  constexpr int64_t es = sizeof(E);
  const HeadLayout in{s, heads, 3 * hd}, ol{s, heads, hd};
  const int64_t problems = last - first, rb = std::min(block_rows, s);
  const bool drop = dropout_p > 0;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float drop_scale = drop ? kernels::dropout_scale(dropout_p) : 1.0f;
  const int64_t per_problem = 4 * s * hd * es + 3 * s * hd * 4 + rb * s * (4 + 4 + es + es);
  const int64_t chunk = chunk_of(problems, per_problem, scratch_bytes);
  const int64_t staged = chunk * s * hd, block = chunk * rb * s;
  const ScratchPieces scratch({es * staged, es * staged, es * staged, es * staged, 4 * staged,
                               4 * staged, 4 * staged, 4 * block, 4 * block, es * block,
                               es * block});
  auto* const q = scratch.get<E>(0);
  auto* const k = scratch.get<E>(1);
  auto* const v = scratch.get<E>(2);
  auto* const dout_s = scratch.get<E>(3);
  auto* const dq = scratch.get<float>(4);
  auto* const dk = scratch.get<float>(5);
  auto* const dv = scratch.get<float>(6);
  auto* const dp = scratch.get<float>(7);
  auto* const pr = scratch.get<float>(8);
  auto* const ds = scratch.get<E>(9);
  auto* const pv_op = scratch.get<E>(10);

  for (int64_t p0 = first; p0 < last; p0 += chunk) {
    const int64_t np = std::min(chunk, last - p0);
    stage<Ops>(q, qkv, in, 0, p0, np, hd);
    stage<Ops>(k, qkv, in, hd, p0, np, hd);
    stage<Ops>(v, qkv, in, 2 * hd, p0, np, hd);
    stage<Ops>(dout_s, dout, ol, 0, p0, np, hd);
    std::fill(dk, dk + np * s * hd, 0.0f);
    std::fill(dv, dv + np * s * hd, 0.0f);
    for (int64_t i0 = 0; i0 < s; i0 += rb) {
      const int64_t i1 = std::min(s, i0 + rb), m = i1 - i0, n = i1;
      // Forward's scores again, and dp[p, 0:m, 0:n] = dout[p, i0:i1] v[p, 0:n]^T
      ops.run(rows_by_keys(q, k, pr, np, s, hd, i0, m, n, scale));
      ops.run(rows_by_keys(dout_s, v, dp, np, s, hd, i0, m, n, 1.0f));
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < np * m; ++r) {
        const int64_t p = r / m, i = i0 + r % m, bh = p0 + p;
        float* prow = pr + r * n;
        float* d = dp + r * n;
        causal_probs_row(prow, i, n, stats[bh * s + i]);
        // The forward's masks: the gradient through the dropped probs, and the probabilities
        // as they multiplied v (rounded as forward rounded them) for dv.
        KeepMask mask(rng, dropout_p);
        const uint64_t base = static_cast<uint64_t>((bh * s + i) * s);
        probs_operand_row<Ops>(pv_op + r * n, prow, i, n, drop, mask, base, drop_scale);
        if (drop) {
          KeepMask mask2(rng, dropout_p);
          for (int64_t j = 0; j <= i; ++j) d[j] = mask2.keep(base + j) ? d[j] * drop_scale : 0.0f;
        }
        // softmax backward: ds = p * (dp - sum_j dp_j p_j)
        float dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < i + 1; ++j) dot += d[j] * prow[j];
#pragma omp simd
        for (int64_t j = 0; j < i + 1; ++j) d[j] = prow[j] * (d[j] - dot);
        E* dsrow = ds + r * n;
        Ops::put_rounded(dsrow, d, i + 1);
        std::fill(dsrow + i + 1, dsrow + n, E{0});
      }
      // dq[p, i0:i1] = scale * ds[p] k[p, 0:n]
      ops.run({.batch = np,
               .m = m,
               .n = hd,
               .k = n,
               .a = op(ds),
               .ld_a = n,
               .stride_a = m * n,
               .b = op(k),
               .ld_b = hd,
               .stride_b = s * hd,
               .c = dq + i0 * hd,
               .ld_c = hd,
               .stride_c = s * hd,
               .alpha = scale});
      // dk[p, 0:n] += scale * ds[p]^T q[p, i0:i1]
      ops.run({.batch = np,
               .m = n,
               .n = hd,
               .k = m,
               .a = op(ds),
               .ld_a = n,
               .stride_a = m * n,
               .trans_a = true,
               .b = op(q + i0 * hd),
               .ld_b = hd,
               .stride_b = s * hd,
               .c = dk,
               .ld_c = hd,
               .stride_c = s * hd,
               .alpha = scale,
               .beta = 1.0f});
      // dv[p, 0:n] += pd[p]^T dout[p, i0:i1]
      ops.run({.batch = np,
               .m = n,
               .n = hd,
               .k = m,
               .a = op(pv_op),
               .ld_a = n,
               .stride_a = m * n,
               .trans_a = true,
               .b = op(dout_s + i0 * hd),
               .ld_b = hd,
               .stride_b = s * hd,
               .c = dv,
               .ld_c = hd,
               .stride_c = s * hd,
               .beta = 1.0f});
    }
    unstage(dqkv, dq, in, 0, p0, np, hd);
    unstage(dqkv, dk, in, hd, p0, np, hd);
    unstage(dqkv, dv, in, 2 * hd, p0, np, hd);
  }
}

}  // namespace

void attention_forward_bf16(MatmulBf16& mm, Bf16* out, float* stats, const Bf16* qkv, int64_t b,
                            int64_t s, int64_t heads, int64_t hd, float dropout_p, RngStream rng,
                            int64_t scratch_bytes, AttentionBf16Path path) {
  const int64_t rows = mm.uses_onednn() ? kBlockRows : kFallbackBlockRows;
  if (mm.uses_onednn() || path == AttentionBf16Path::kBatched) {
    forward(Bf16Operands{&mm}, out, stats, qkv, 0, b * heads, s, heads, hd, dropout_p, rng,
            scratch_bytes, rows);
    return;
  }
  // A problem a thread, its row blocks' scores in the thread's cache (the fp32 path's order).
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < b * heads; ++bh)
    forward(F32Operands{}, out, stats, qkv, bh, bh + 1, s, heads, hd, dropout_p, rng, scratch_bytes,
            rows);
}

void attention_backward_bf16(MatmulBf16& mm, Bf16* dqkv, const Bf16* dout, const Bf16* qkv,
                             const float* stats, int64_t b, int64_t s, int64_t heads, int64_t hd,
                             float dropout_p, RngStream rng, int64_t scratch_bytes,
                             AttentionBf16Path path) {
  const int64_t rows = mm.uses_onednn() ? kBlockRows : kFallbackBlockRows;
  if (mm.uses_onednn() || path == AttentionBf16Path::kBatched) {
    backward(Bf16Operands{&mm}, dqkv, dout, qkv, stats, 0, b * heads, s, heads, hd, dropout_p, rng,
             scratch_bytes, rows);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < b * heads; ++bh)
    backward(F32Operands{}, dqkv, dout, qkv, stats, bh, bh + 1, s, heads, hd, dropout_p, rng,
             scratch_bytes, rows);
}

}  // namespace mtnlg::cpu
