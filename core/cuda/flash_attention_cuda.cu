// Flash-style causal attention on CUDA for bf16 and fp16: core/kernels/flash_attention.h's block
// programs run by a device executor whose products are tensor-core wmma tiles (16x16x16, fp32
// accumulation) and whose phases end in __syncthreads. One block per (query or key block, head,
// sequence); shared memory holds one tile of scores, never [s, s]. Backward is two kernels
// (dq, then dk and dv), deterministic; its only scratch is delta [b, heads, s] in fp32.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"
#include "core/kernels/dropout_math.h"
#include "core/kernels/flash_attention.h"

namespace mtnlg {

namespace {

namespace fl = kernels::flash;

// The wmma element type with T's bits.
template <typename T>
struct Wmma;
template <>
struct Wmma<Bf16> {
  using type = __nv_bfloat16;
};
template <>
struct Wmma<F16> {
  using type = __half;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MTNLG_FLASH_WMMA 1
namespace wm = nvcuda::wmma;
using Acc = wm::fragment<wm::accumulator, 16, 16, 16, float>;
#endif

// The block programs' executor on the GPU (core/kernels/flash_attention.h says what it must do).
// Products: the 16x16 output tiles are dealt round-robin to the warps. Where a warp's tiles form
// a grid (fl::warp_grid: the score tiles always, the head-size ones at 16, 32, 64 and 128) and
// kGrids, its k loop runs once for all of them, loading each A and B fragment once per k step,
// and the accumulator slots stay in the warps' registers from zero to flush (no round trip
// through shared memory per key tile; forward's rescale of O by row is done on the registers,
// with the fragment's element-to-row mapping probed once per block). Otherwise each tile runs
// its own k loop and the slots live at home in shared memory. The same products in the same
// order either way, so the same bits.
template <bool kGrids>
struct DeviceExec {
  static_assert(fl::kGridMaxCols == 1, "slots keep one tile column a warp");
  static constexpr int kWarps = fl::kThreads / 32;
#ifdef MTNLG_FLASH_WMMA
  Acc slot_[2][fl::kGridMaxRows];
  int rows_[Acc::num_elements];  // the row, within its tile, of an accumulator's element e
#endif

  // Every thread, before the program: probes the accumulator layout through the first 1 KiB of
  // the block's shared memory (the program overwrites it).
  __device__ __forceinline__ explicit DeviceExec(char* smem) {
#ifdef MTNLG_FLASH_WMMA
    if (!kGrids) return;
    float* probe = reinterpret_cast<float*>(smem);
    for (int i = static_cast<int>(threadIdx.x); i < 256; i += fl::kThreads)
      probe[i] = static_cast<float>(i / 16);
    __syncthreads();
    Acc f;
    wm::load_matrix_sync(f, probe, 16, wm::mem_row_major);
#pragma unroll
    for (int e = 0; e < Acc::num_elements; ++e) rows_[e] = static_cast<int>(f.x[e]);
    __syncthreads();
#else
    (void)smem;
#endif
  }

  template <typename F>
  __device__ __forceinline__ void threads(F&& f) {
    f(static_cast<int>(threadIdx.x));
    __syncthreads();
  }

  __device__ __forceinline__ static int warp() {
    return static_cast<int>(threadIdx.x) / 32;
  }

  // This warp's grid of an [m, n] product when kGrids and there is one (g.grid false: none).
  __device__ __forceinline__ static fl::WarpGrid grid(int m, int n) {
    fl::WarpGrid g = fl::warp_grid(warp(), kWarps, m, n);
    g.grid = g.grid && kGrids;
    return g;
  }

#ifdef MTNLG_FLASH_WMMA
  // acc[r] += A B over the grid's tile row r (one tile column), k in steps of 16.
  template <bool kArow, bool kBrow, typename T>
  __device__ __forceinline__ static void grid_mma(Acc* acc, const fl::WarpGrid& g, const T* a,
                                                  int lda, const T* b, int ldb, int k) {
    using W = typename Wmma<T>::type;
    using LayoutA = std::conditional_t<kArow, wm::row_major, wm::col_major>;
    using LayoutB = std::conditional_t<kBrow, wm::row_major, wm::col_major>;
    const W* aw = reinterpret_cast<const W*>(a);
    const W* bw = reinterpret_cast<const W*>(b);
    const int j0 = g.col0 * 16;
    // Not unrolled: unrolling keeps several k steps' fragments live, and the registers would
    // then halve the blocks an SM holds.
#pragma unroll 1
    for (int l0 = 0; l0 < k; l0 += 16) {
      wm::fragment<wm::matrix_b, 16, 16, 16, W, LayoutB> fb;
      wm::load_matrix_sync(fb, bw + (kBrow ? l0 * ldb + j0 : j0 * ldb + l0), ldb);
#pragma unroll
      for (int r = 0; r < fl::kGridMaxRows; ++r) {
        if (r >= g.rows) continue;
        const int i0 = (g.row0 + r * g.row_step) * 16;
        wm::fragment<wm::matrix_a, 16, 16, 16, W, LayoutA> fa;
        wm::load_matrix_sync(fa, aw + (kArow ? i0 * lda + l0 : l0 * lda + i0), lda);
        wm::mma_sync(acc[r], fa, fb, acc[r]);
      }
    }
  }

  __device__ __forceinline__ static float* tile(float* c, int ldc, const fl::WarpGrid& g, int r) {
    return c + (g.row0 + r * g.row_step) * 16 * ldc + g.col0 * 16;
  }
#endif

  template <bool kArow, bool kBrow, typename T>
  __device__ __forceinline__ void mma(float* c, int ldc, const T* a, int lda, const T* b, int ldb,
                                      int m, int n, int k, bool accumulate) {
#ifdef MTNLG_FLASH_WMMA
    const fl::WarpGrid g = grid(m, n);
    if (g.grid) {
      Acc acc[fl::kGridMaxRows];
#pragma unroll
      for (int r = 0; r < fl::kGridMaxRows; ++r) {
        if (r >= g.rows) continue;
        if (accumulate)
          wm::load_matrix_sync(acc[r], tile(c, ldc, g, r), ldc, wm::mem_row_major);
        else
          wm::fill_fragment(acc[r], 0.0f);
      }
      grid_mma<kArow, kBrow>(acc, g, a, lda, b, ldb, k);
#pragma unroll
      for (int r = 0; r < fl::kGridMaxRows; ++r)
        if (r < g.rows) wm::store_matrix_sync(tile(c, ldc, g, r), acc[r], ldc, wm::mem_row_major);
      __syncthreads();
      return;
    }
    using W = typename Wmma<T>::type;
    using LayoutA = std::conditional_t<kArow, wm::row_major, wm::col_major>;
    using LayoutB = std::conditional_t<kBrow, wm::row_major, wm::col_major>;
    const W* aw = reinterpret_cast<const W*>(a);
    const W* bw = reinterpret_cast<const W*>(b);
    const int tiles_n = n / 16, tiles = (m / 16) * tiles_n;
    for (int t = warp(); t < tiles; t += kWarps) {
      const int i0 = t / tiles_n * 16, j0 = t % tiles_n * 16;
      Acc acc;
      if (accumulate)
        wm::load_matrix_sync(acc, c + i0 * ldc + j0, ldc, wm::mem_row_major);
      else
        wm::fill_fragment(acc, 0.0f);
      for (int l0 = 0; l0 < k; l0 += 16) {
        wm::fragment<wm::matrix_a, 16, 16, 16, W, LayoutA> fa;
        wm::fragment<wm::matrix_b, 16, 16, 16, W, LayoutB> fb;
        wm::load_matrix_sync(fa, aw + (kArow ? i0 * lda + l0 : l0 * lda + i0), lda);
        wm::load_matrix_sync(fb, bw + (kBrow ? l0 * ldb + j0 : j0 * ldb + l0), ldb);
        wm::mma_sync(acc, fa, fb, acc);
      }
      wm::store_matrix_sync(c + i0 * ldc + j0, acc, ldc, wm::mem_row_major);
    }
#else
    // The host only launches these kernels on compute capability 8.0 or later.
    (void)c, (void)ldc, (void)a, (void)lda, (void)b, (void)ldb, (void)m, (void)n, (void)k,
        (void)accumulate;
    __trap();
#endif
    __syncthreads();
  }

  template <int kSlot>
  __device__ __forceinline__ void zero(float* c, int ldc, int m, int n) {
#ifdef MTNLG_FLASH_WMMA
    const fl::WarpGrid g = grid(m, n);
    if (g.grid) {
#pragma unroll
      for (int r = 0; r < fl::kGridMaxRows; ++r)
        if (r < g.rows) wm::fill_fragment(slot_[kSlot][r], 0.0f);
      __syncthreads();
      return;
    }
#endif
    threads([&](int t) {
      for (int e = t; e < m * n; e += fl::kThreads) c[(e / n) * ldc + e % n] = 0.0f;
    });
  }

  template <int kSlot>
  __device__ __forceinline__ void scale_rows(float* c, int ldc, int m, int n, const float* alpha) {
#ifdef MTNLG_FLASH_WMMA
    const fl::WarpGrid g = grid(m, n);
    if (g.grid) {
#pragma unroll
      for (int r = 0; r < fl::kGridMaxRows; ++r) {
        if (r >= g.rows) continue;
        const float* row_alpha = alpha + (g.row0 + r * g.row_step) * 16;
#pragma unroll
        for (int e = 0; e < Acc::num_elements; ++e) slot_[kSlot][r].x[e] *= row_alpha[rows_[e]];
      }
      __syncthreads();
      return;
    }
#endif
    threads([&](int t) {
      for (int e = t; e < m * n; e += fl::kThreads) c[(e / n) * ldc + e % n] *= alpha[e / n];
    });
  }

  template <bool kArow, bool kBrow, int kSlot, typename T>
  __device__ __forceinline__ void mma_acc(float* c, int ldc, const T* a, int lda, const T* b,
                                          int ldb, int m, int n, int k) {
#ifdef MTNLG_FLASH_WMMA
    const fl::WarpGrid g = grid(m, n);
    if (g.grid) {
      grid_mma<kArow, kBrow>(slot_[kSlot], g, a, lda, b, ldb, k);
      __syncthreads();
      return;
    }
#endif
    mma<kArow, kBrow>(c, ldc, a, lda, b, ldb, m, n, k, true);
  }

  template <int kSlot>
  __device__ __forceinline__ void flush(float* c, int ldc, int m, int n) {
#ifdef MTNLG_FLASH_WMMA
    const fl::WarpGrid g = grid(m, n);
    if (g.grid) {
#pragma unroll
      for (int r = 0; r < fl::kGridMaxRows; ++r)
        if (r < g.rows)
          wm::store_matrix_sync(tile(c, ldc, g, r), slot_[kSlot][r], ldc, wm::mem_row_major);
    }
#else
    (void)c, (void)ldc, (void)m, (void)n;
#endif
    __syncthreads();
  }
};

template <typename T, bool kGrids>
__global__ void __launch_bounds__(fl::kThreads, kGrids ? 1 : 2)
    flash_forward_kernel(fl::ForwardArgs<T> a) {
  extern __shared__ __align__(128) char smem[];
  DeviceExec<kGrids> ex(smem);
  // The last query blocks see the most keys: start them first.
  const int64_t rb = static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x;
  fl::forward_block<T>(ex, smem, a, blockIdx.z, blockIdx.y, rb);
}

template <typename T, bool kGrids>
__global__ void __launch_bounds__(fl::kThreads, kGrids ? 1 : 2)
    flash_dq_kernel(fl::BackwardArgs<T> a) {
  extern __shared__ __align__(128) char smem[];
  DeviceExec<kGrids> ex(smem);
  const int64_t rb = static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x;
  fl::dq_block<T>(ex, smem, a, blockIdx.z, blockIdx.y, rb);
}

template <typename T, bool kGrids>
__global__ void __launch_bounds__(fl::kThreads, kGrids ? 1 : 2)
    flash_dkv_kernel(fl::BackwardArgs<T> a) {
  extern __shared__ __align__(128) char smem[];
  DeviceExec<kGrids> ex(smem);
  // The first key blocks are seen by the most queries, and come first already.
  fl::dkv_block<T>(ex, smem, a, blockIdx.z, blockIdx.y, blockIdx.x);
}

template <typename K>
void launch(K kernel, int64_t blocks, const fl::Dims& d, size_t smem, cudaStream_t stream,
            auto args) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(d.heads),
                  static_cast<unsigned>(d.b));
  kernel<<<grid, fl::kThreads, smem, stream>>>(args);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

bool flash_attention_applies(const FlashDevice& dev, const Tensor& qkv, int64_t heads,
                             std::initializer_list<const Tensor*> operands) {
  if (dev.compute_major < 8) return false;
  if (qkv.dtype() != DType::kBF16 && qkv.dtype() != DType::kF16) return false;
  const fl::Dims d = flash_dims(qkv, heads);
  if (!fl::head_dim_supported(d.hd)) return false;
  if (d.b > 65535 || d.heads > 65535) return false;
  const size_t need =
      std::max(fl::forward_smem_bytes<Bf16>(d.hd), fl::backward_smem_bytes<Bf16>(d.hd));
  if (need > dev.max_smem_optin) return false;
  // 16-byte loads of every row.
  for (const Tensor* t : operands)
    if (!aligned16(t->data())) return false;
  return aligned16(qkv.data());
}

void flash_attention_forward_cuda(const FlashDevice& dev, Tensor& out, Tensor& stats,
                                  const Tensor& qkv, int64_t heads, double dropout_p, RngStream rng,
                                  cudaStream_t stream) {
  const fl::Dims d = flash_dims(qkv, heads);
  if (d.b == 0 || d.s == 0) return;
  dispatch_floating(qkv.dtype(), "flash_attention_forward", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Bf16> || std::is_same_v<T, F16>) {
      const fl::ForwardArgs<T> a = flash_forward_args<T>(out, stats, qkv, heads, dropout_p, rng);
      launch(dev.warp_grids ? flash_forward_kernel<T, true> : flash_forward_kernel<T, false>,
             fl::query_blocks(d.s), d, fl::forward_smem_bytes<T>(d.hd), stream, a);
    } else {
      throw unsupported("flash_attention_forward: bf16 and fp16 only");
    }
  });
}

void flash_attention_backward_cuda(const FlashDevice& dev, Tensor& dqkv, const Tensor& dout,
                                   const Tensor& qkv, const Tensor& out, const Tensor& stats,
                                   int64_t heads, double dropout_p, RngStream rng, Workspace& ws,
                                   cudaStream_t stream) {
  const fl::Dims d = flash_dims(qkv, heads);
  if (d.b == 0 || d.s == 0) return;
  float* delta = static_cast<float*>(ws.get(static_cast<size_t>(d.b * d.heads * d.s) * 4));
  dispatch_floating(qkv.dtype(), "flash_attention_backward", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Bf16> || std::is_same_v<T, F16>) {
      const fl::BackwardArgs<T> a =
          flash_backward_args<T>(dqkv, dout, qkv, out, stats, heads, dropout_p, rng, delta);
      launch(dev.warp_grids ? flash_dq_kernel<T, true> : flash_dq_kernel<T, false>,
             fl::query_blocks(d.s), d, fl::DqSmem<T>(d.hd).bytes, stream, a);
      launch(dev.warp_grids ? flash_dkv_kernel<T, true> : flash_dkv_kernel<T, false>,
             fl::key_blocks(d.s), d, fl::DkvSmem<T>(d.hd).bytes, stream, a);
    } else {
      throw unsupported("flash_attention_backward: bf16 and fp16 only");
    }
  });
}

}  // namespace mtnlg
