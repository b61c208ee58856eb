// Causal self-attention on CUDA with Backend's contract (core/backend.h): forward saves each
// row's log-sum-exp in stats [b, heads, s]; the probabilities [heads, s, s] of one sequence live
// in the workspace only, and backward recomputes them from the same score GEMM (cuBLAS is
// deterministic for one shape, so the bits are forward's) as exp(score - lse). Per sequence, the
// heads' products are
// strided-batched cuBLAS GEMMs over the qkv layout (head h's q, k, v at columns h*3*hd + {0, hd,
// 2hd} of rows of ldq = heads*3*hd), and a warp-per-row kernel between them does the causal
// softmax and the dropout, in acc_t<T>, with Philox keep bits regenerated in backward from the
// element index ((b*heads + h)*s + i)*s + j, as the CPU kernel does.
//
// Scores and their gradient are kept in acc_t<T> (fp32 for bf16/fp16); the matrices that feed a
// GEMM as operands (dropped probabilities, the softmax gradient) are rounded to T, as in
// Megatron's fused softmax. What is left of [s, s] is this per-sequence workspace. These are the
// blocked kernels: fp32 and f64 always, bf16/fp16 where the chosen flash kernels (by default
// the FA2-style ones, flash2_attention_cuda.cu) do not apply or MTNLG_CUDA_ATTENTION=blocked.
//
// Causality in row blocks (as the CPU kernel does): query rows [r0, r1) only need key columns
// [0, r1), so every product runs per row block over that prefix, and the blocks above the
// diagonal are never computed, read or written: each row's kernel writes its columns up to the end
// of its block (zeros past the diagonal), which covers every element the block GEMMs read.
// A few blocks per sequence: enough to skip most of the upper triangle's traffic, few enough
// that the extra GEMM launches stay cheap.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "core/cuda/attention_workspace.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"
#include "core/cuda/warp_exec.cuh"
#include "core/kernels/dropout_math.h"
#include "core/kernels/softmax_rows.h"
#include "core/rng.h"

namespace mtnlg {

namespace {

constexpr int kRowsPerBlock = kCudaBlock / 32;

// f(j) for lane `lane`'s columns of a row's [0, end): four consecutive at a time (j = 4 lane +
// 128 q + w), so that a KeepMask's Philox block serves four of its dropout decisions.
template <typename F>
__device__ __forceinline__ void lane_columns(int lane, int64_t end, F&& f) {
  for (int64_t j4 = 4 * static_cast<int64_t>(lane); j4 < end; j4 += 128)
    for (int64_t j = j4; j < j4 + 4 && j < end; ++j) f(j);
}

// Row g = h*s + i of one sequence's scores sc [heads, s, s] (already scaled): writes the row's
// log-sum-exp to lse[g], the causal softmax exp(x - lse) to p when p is not null, and
// p * keep / (1 - dropout) to pd when pd is not null.
template <typename T>
__global__ void softmax_forward_kernel(T* p, T* pd, acc_t<T>* lse, const acc_t<T>* sc, int64_t rows,
                                       int64_t s, int64_t block, uint64_t elem0, float dropout_p,
                                       acc_t<T> drop_scale, RngStream rng) {
  using A = acc_t<T>;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (g >= rows) return;
  const int64_t i = g % s;
  const A* x = sc + g * s;
  A mx = x[0];
  for (int64_t j = lane; j <= i; j += 32) mx = x[j] > mx ? x[j] : mx;
  mx = warp_max(mx);
  A sum = 0;
  for (int64_t j = lane; j <= i; j += 32) sum += exp(x[j] - mx);
  const A l = mx + log(warp_sum(sum));
  if (lane == 0) lse[g] = l;
  T* prow = p ? p + g * s : nullptr;
  T* pdrow = pd ? pd + g * s : nullptr;
  const uint64_t base = elem0 + static_cast<uint64_t>(g * s);
  // Columns up to the end of this row's causal block; beyond it nothing is read.
  const int64_t end = (i / block + 1) * block < s ? (i / block + 1) * block : s;
  kernels::KeepMask mask(rng, dropout_p);
  lane_columns(lane, end, [&](int64_t j) {
    const A v = j <= i ? exp(x[j] - l) : A(0);
    if (prow) prow[j] = static_cast<T>(v);
    if (pdrow) {
      const bool keep = j <= i && mask.keep(base + static_cast<uint64_t>(j));
      pdrow[j] = static_cast<T>(keep ? v * drop_scale : A(0));
    }
  });
}

// Row g of the softmax backward: dpd (acc) = dO V^T; the probabilities p = exp(sc - lse), from
// the recomputed scores sc and forward's log-sum-exp, rounded to T as forward's were (the same
// values softmax_forward_kernel wrote). Writes ds = p * (d - sum_j d_j p_j) with d = dpd * keep /
// (1 - dropout), and pv, the operand of dV's product: p dropped as in forward (p itself
// without dropout), each to the end of the row's causal block (zeros past the diagonal). The
// probabilities are computed where they are used: a kernel that wrote them for this one to
// read moved 4 bytes an element more.
template <typename T>
__global__ void softmax_backward_kernel(T* ds, T* pv, const acc_t<T>* dpd, const acc_t<T>* sc,
                                        const acc_t<T>* lse, int64_t rows, int64_t s, int64_t block,
                                        uint64_t elem0, float dropout_p, acc_t<T> drop_scale,
                                        RngStream rng) {
  using A = acc_t<T>;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (g >= rows) return;
  const int64_t i = g % s;
  const A* drow = dpd + g * s;
  const A* x = sc + g * s;
  const A l = lse[g];
  const auto prob = [&](int64_t j) { return static_cast<A>(static_cast<T>(exp(x[j] - l))); };
  const uint64_t base = elem0 + static_cast<uint64_t>(g * s);
  const bool drop = dropout_p > 0.0f;
  kernels::KeepMask mask(rng, dropout_p);
  A dot = 0;
  lane_columns(lane, i + 1, [&](int64_t j) {
    A d = drow[j];
    if (drop) d = mask.keep(base + static_cast<uint64_t>(j)) ? d * drop_scale : 0;
    dot += d * prob(j);
  });
  dot = warp_sum(dot);
  T* dsrow = ds + g * s;
  T* pvrow = pv + g * s;
  // Columns up to the end of this row's causal block; beyond it nothing is read.
  const int64_t end = (i / block + 1) * block < s ? (i / block + 1) * block : s;
  lane_columns(lane, end, [&](int64_t j) {
    if (j > i) {
      dsrow[j] = static_cast<T>(A(0));
      pvrow[j] = static_cast<T>(A(0));
      return;
    }
    const A pj = prob(j);
    A d = drow[j];
    if (drop) {
      const bool keep = mask.keep(base + static_cast<uint64_t>(j));
      d = keep ? d * drop_scale : A(0);
      pvrow[j] = static_cast<T>(keep ? pj * drop_scale : A(0));
    } else {
      pvrow[j] = static_cast<T>(pj);
    }
    dsrow[j] = static_cast<T>(pj * (d - dot));
  });
}

namespace sr = kernels::softmax_rows;

// Rows (warps) of a block of the register kernels: their ~100-130 registers a thread leave
// room for several blocks an SM, and each warp has its whole row's loads in flight at once.
constexpr int kRegisterRowWarps = 4;

// softmax_forward_kernel's rows from registers (core/kernels/softmax_rows.h): the same
// outputs, the log-sum-exp's sum in another order.
template <typename T, int kChunks>
__global__ void __launch_bounds__(kRegisterRowWarps * 32)
    softmax_forward_rows_kernel(T* p, T* pd, float* lse, const float* sc, int64_t rows, int64_t s,
                                int64_t block, uint64_t elem0, float dropout_p, float drop_scale,
                                RngStream rng) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kRegisterRowWarps + threadIdx.x / 32;
  if (g >= rows) return;  // the whole warp: g is the warp's
  WarpExec w;
  const int64_t i = g % s;
  const int64_t end = (i / block + 1) * block < s ? (i / block + 1) * block : s;
  const sr::Row r{i, end, elem0 + static_cast<uint64_t>(g * s)};
  sr::forward_row<T, kChunks>(w, static_cast<int>(threadIdx.x % 32), p ? p + g * s : nullptr,
                              pd ? pd + g * s : nullptr, lse + g, sc + g * s, r, dropout_p,
                              drop_scale, rng);
}

// softmax_backward_kernel's rows from registers: the same arithmetic per element and the same
// order of the row's sum (a lane's columns, then the warp's butterfly).
template <typename T, int kChunks>
__global__ void __launch_bounds__(kRegisterRowWarps * 32)
    softmax_backward_rows_kernel(T* ds, T* pv, const float* dpd, const float* sc, const float* lse,
                                 int64_t rows, int64_t s, int64_t block, uint64_t elem0,
                                 float dropout_p, float drop_scale, RngStream rng) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kRegisterRowWarps + threadIdx.x / 32;
  if (g >= rows) return;
  WarpExec w;
  const int64_t i = g % s;
  const int64_t end = (i / block + 1) * block < s ? (i / block + 1) * block : s;
  const sr::Row r{i, end, elem0 + static_cast<uint64_t>(g * s)};
  sr::backward_row<T, kChunks>(w, static_cast<int>(threadIdx.x % 32), ds + g * s, pv + g * s,
                               dpd + g * s, sc + g * s, lse[g], r, dropout_p, drop_scale, rng);
}

// Calls f(integral_constant<int, chunks>) for the register kernels' chunk count of rows of s
// columns and returns true, or returns false where they do not apply: f64 (scores in double),
// s not a multiple of 4 or over 2048 (sr::chunks_for), or the first row of an input (ins, fp32)
// or output (outs, null for none) off its vector alignment (then every row is: rows are s apart,
// s a multiple of 4).
template <typename T, typename F>
bool with_register_rows(int64_t s, std::initializer_list<const acc_t<T>*> ins,
                        std::initializer_list<const T*> outs, F&& f) {
  if constexpr (!std::is_same_v<acc_t<T>, float>) {
    return false;
  } else {
    const auto aligned = [](const void* q, size_t n) {
      return reinterpret_cast<uintptr_t>(q) % n == 0;
    };
    for (const float* in : ins)
      if (!aligned(in, 16)) return false;
    for (const T* o : outs)
      if (o != nullptr && !aligned(o, 4 * sizeof(T))) return false;
    switch (sr::chunks_for(s)) {
      case 4:
        f(std::integral_constant<int, 4>{});
        return true;
      case 8:
        f(std::integral_constant<int, 8>{});
        return true;
      case 16:
        f(std::integral_constant<int, 16>{});
        return true;
      default:
        return false;
    }
  }
}

unsigned register_row_blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kRegisterRowWarps - 1) / kRegisterRowWarps);
}

struct Dims {
  int64_t b, s, heads, hd, ldq, ldo;
};

Dims dims_of(const Tensor& qkv, int64_t heads) {
  Dims d{};
  d.b = qkv.dim(0);
  d.s = qkv.dim(1);
  d.heads = heads;
  d.hd = qkv.dim(2) / (3 * heads);
  d.ldq = heads * 3 * d.hd;
  d.ldo = heads * d.hd;
  return d;
}

// Rows per causal block for sequence length s: up to 4 blocks, each a multiple of 64 rows (one
// block below 512 rows).
int64_t causal_block(int64_t s) {
  const int64_t blocks = std::min<int64_t>(4, std::max<int64_t>(1, s / 256));
  const int64_t rows = (s + blocks - 1) / blocks;
  return (rows + 63) / 64 * 64;
}

// attention_workspace for this call's shapes and dtype.
template <typename T>
AttentionWorkspace workspace_of(const Dims& d, bool drop) {
  return attention_workspace(d.heads, d.s, sizeof(acc_t<T>), sizeof(T), drop);
}

// 1/sqrt(hd), and the kept elements' 1/(1 - p) with p through float, as the CPU kernel takes
// it (the f64 twin then agrees to the last bit).
template <typename A>
struct Scales {
  A scores, dropout;
  Scales(int64_t hd, double p)
      : scores(A(1) / sqrt(static_cast<A>(hd))),
        dropout(p > 0.0 ? kernels::dropout_scale(static_cast<A>(static_cast<float>(p))) : A(1)) {}
};

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

cudaStream_t stream_of(const Blas& blas) {
  cudaStream_t stream = nullptr;
  CUBLAS_CHECK(blas.lib->get_stream(blas.handle, &stream));
  return stream;
}

// sc_h[r0:r1, 0:r1] = scale * q_h[r0:r1] k_h[0:r1]^T for every row block of one sequence: the
// same calls in forward and backward, so the same bits.
template <typename T>
void score_blocks(const Blas& blas, acc_t<T>* sc, const T* q, const Dims& d, int64_t blk,
                  acc_t<T> scale) {
  const DType dt = dtype_of<T>(), acc = dtype_of<acc_t<T>>();
  for (int64_t r0 = 0; r0 < d.s; r0 += blk) {
    const int64_t r1 = std::min(d.s, r0 + blk);
    gemm_strided_batched_cuda(blas, dt, acc, false, true, r1 - r0, r1, d.hd, scale, q + r0 * d.ldq,
                              d.ldq, 3 * d.hd, q + d.hd, d.ldq, 3 * d.hd, 0.0, sc + r0 * d.s, d.s,
                              d.s * d.s, d.heads);
  }
}

}  // namespace

void attention_forward_cuda(const Blas& blas, Tensor& out, Tensor& stats, const Tensor& qkv,
                            int64_t heads, double dropout_p, RngStream rng, Workspace& ws) {
  const Dims d = dims_of(qkv, heads);
  if (d.b == 0 || d.s == 0) return;
  const cudaStream_t stream = stream_of(blas);
  const int64_t hss = d.heads * d.s * d.s;
  const bool drop = dropout_p > 0.0;
  dispatch_dtype(Device::kCUDA, qkv.dtype(), "attention_forward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const DType dt = qkv.dtype(), acc = dtype_of<A>();
    const AttentionWorkspace layout = workspace_of<T>(d, drop);
    char* scratch = static_cast<char*>(ws.get(static_cast<size_t>(layout.forward_bytes())));
    A* sc = reinterpret_cast<A*>(scratch);
    // With dropout the product with V takes the dropped probabilities only: the undropped ones
    // are not written (backward recomputes them), a [heads, s, s] write a sequence saved.
    T* p = drop ? nullptr : reinterpret_cast<T*>(scratch + layout.probs_offset());
    T* pd = drop ? reinterpret_cast<T*>(scratch + layout.dropped_offset()) : nullptr;
    const T* pv = drop ? pd : p;
    const Scales<A> scales(d.hd, dropout_p);
    const A scale = scales.scores, drop_scale = scales.dropout;
    const int64_t blk = causal_block(d.s);
    for (int64_t bi = 0; bi < d.b; ++bi) {
      const T* q = qkv.data_as<T>() + bi * d.s * d.ldq;
      A* lse = stats.data_as<A>() + bi * d.heads * d.s;
      T* o = out.data_as<T>() + bi * d.s * d.ldo;
      score_blocks<T>(blas, sc, q, d, blk, scale);
      const int64_t rows = d.heads * d.s;
      const auto elem0 = static_cast<uint64_t>(bi * hss);
      const auto fp = static_cast<float>(dropout_p);
      const bool in_registers = with_register_rows<T>(d.s, {sc}, {p, pd}, [&](auto chunks) {
        if constexpr (std::is_same_v<A, float>)
          softmax_forward_rows_kernel<T, decltype(chunks)::value>
              <<<register_row_blocks(rows), kRegisterRowWarps * 32, 0, stream>>>(
                  p, pd, lse, sc, rows, d.s, blk, elem0, fp, drop_scale, rng);
      });
      if (!in_registers)
        softmax_forward_kernel<<<row_blocks(rows), kCudaBlock, 0, stream>>>(
            p, pd, lse, sc, rows, d.s, blk, elem0, fp, drop_scale, rng);
      CUDA_CHECK(cudaGetLastError());
      // out_h[r0:r1] = pd_h[r0:r1, 0:r1] v_h[0:r1]
      for (int64_t r0 = 0; r0 < d.s; r0 += blk) {
        const int64_t r1 = std::min(d.s, r0 + blk);
        gemm_strided_batched_cuda(blas, dt, dt, false, false, r1 - r0, d.hd, r1, 1.0, pv + r0 * d.s,
                                  d.s, d.s * d.s, q + 2 * d.hd, d.ldq, 3 * d.hd, 0.0,
                                  o + r0 * d.ldo, d.ldo, d.hd, d.heads);
      }
    }
  });
}

void attention_backward_cuda(const Blas& blas, Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                             const Tensor& stats, int64_t heads, double dropout_p, RngStream rng,
                             Workspace& ws) {
  const Dims d = dims_of(qkv, heads);
  if (d.b == 0 || d.s == 0) return;
  const cudaStream_t stream = stream_of(blas);
  const int64_t hss = d.heads * d.s * d.s;
  const bool drop = dropout_p > 0.0;
  dispatch_dtype(Device::kCUDA, qkv.dtype(), "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const DType dt = qkv.dtype(), acc = dtype_of<A>();
    const AttentionWorkspace layout = workspace_of<T>(d, drop);
    char* scratch = static_cast<char*>(ws.get(static_cast<size_t>(layout.backward_bytes())));
    A* sc = reinterpret_cast<A*>(scratch);  // the recomputed scores
    A* dpd = reinterpret_cast<A*>(scratch + layout.score_grad_offset());
    T* pv = reinterpret_cast<T*>(scratch + layout.backward_probs_offset());
    T* ds = reinterpret_cast<T*>(scratch + layout.softmax_grad_offset());
    const Scales<A> scales(d.hd, dropout_p);
    const A scale = scales.scores, drop_scale = scales.dropout;
    const int64_t blk = causal_block(d.s);
    for (int64_t bi = 0; bi < d.b; ++bi) {
      const T* q = qkv.data_as<T>() + bi * d.s * d.ldq;
      const A* lse = stats.data_as<A>() + bi * d.heads * d.s;
      const T* dO = dout.data_as<T>() + bi * d.s * d.ldo;
      T* dq = dqkv.data_as<T>() + bi * d.s * d.ldq;
      // Forward's scores again (its score GEMMs: the same bits); the softmax backward takes the
      // probabilities from them and forward's log-sum-exps.
      score_blocks<T>(blas, sc, q, d, blk, scale);
      // dpd_h[r0:r1, 0:r1] = dO_h[r0:r1] v_h[0:r1]^T
      for (int64_t r0 = 0; r0 < d.s; r0 += blk) {
        const int64_t r1 = std::min(d.s, r0 + blk);
        gemm_strided_batched_cuda(blas, dt, acc, false, true, r1 - r0, r1, d.hd, 1.0,
                                  dO + r0 * d.ldo, d.ldo, d.hd, q + 2 * d.hd, d.ldq, 3 * d.hd, 0.0,
                                  dpd + r0 * d.s, d.s, d.s * d.s, d.heads);
      }
      const int64_t rows = d.heads * d.s;
      const auto elem0 = static_cast<uint64_t>(bi * hss);
      const auto fp = static_cast<float>(dropout_p);
      const bool in_registers = with_register_rows<T>(d.s, {sc, dpd}, {ds, pv}, [&](auto chunks) {
        if constexpr (std::is_same_v<A, float>)
          softmax_backward_rows_kernel<T, decltype(chunks)::value>
              <<<register_row_blocks(rows), kRegisterRowWarps * 32, 0, stream>>>(
                  ds, pv, dpd, sc, lse, rows, d.s, blk, elem0, fp, drop_scale, rng);
      });
      if (!in_registers)
        softmax_backward_kernel<<<row_blocks(rows), kCudaBlock, 0, stream>>>(
            ds, pv, dpd, sc, lse, rows, d.s, blk, elem0, fp, drop_scale, rng);
      CUDA_CHECK(cudaGetLastError());
      for (int64_t r0 = 0; r0 < d.s; r0 += blk) {
        const int64_t r1 = std::min(d.s, r0 + blk);
        // dq_h[r0:r1] = scale * ds_h[r0:r1, 0:r1] k_h[0:r1]
        gemm_strided_batched_cuda(blas, dt, dt, false, false, r1 - r0, d.hd, r1, scale,
                                  ds + r0 * d.s, d.s, d.s * d.s, q + d.hd, d.ldq, 3 * d.hd, 0.0,
                                  dq + r0 * d.ldq, d.ldq, 3 * d.hd, d.heads);
        // Key and value rows [r0, r1) receive from query rows i >= r0 only:
        // dk_h[r0:r1] = scale * ds_h[r0:s, r0:r1]^T q_h[r0:s]; dv_h likewise from pd and dO.
        gemm_strided_batched_cuda(blas, dt, dt, true, false, r1 - r0, d.hd, d.s - r0, scale,
                                  ds + r0 * d.s + r0, d.s, d.s * d.s, q + r0 * d.ldq, d.ldq,
                                  3 * d.hd, 0.0, dq + r0 * d.ldq + d.hd, d.ldq, 3 * d.hd, d.heads);
        gemm_strided_batched_cuda(blas, dt, dt, true, false, r1 - r0, d.hd, d.s - r0, 1.0,
                                  pv + r0 * d.s + r0, d.s, d.s * d.s, dO + r0 * d.ldo, d.ldo, d.hd,
                                  0.0, dq + r0 * d.ldq + 2 * d.hd, d.ldq, 3 * d.hd, d.heads);
      }
    }
  });
}

}  // namespace mtnlg
