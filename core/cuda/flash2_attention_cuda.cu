// The FA2-style causal attention on CUDA (bf16/fp16, head sizes 64 and 128, sm_80 and later):
// core/kernels/flash2_forward.h's and flash2_backward.h's thread programs with their collectives
// as the hardware's (__syncthreads, __shfl_xor_sync, mma.sync.m16n8k16 with fp32 accumulation).
// One block of four warps per 64 query rows (forward, dq; the forward's 128 with
// MTNLG_CUDA_FLASH2_ROWS=128) or 64 keys (dk/dv) of a head of a sequence; the query blocks that
// see the most keys start first.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"
#include "core/cuda/warp_exec.cuh"
#include "core/kernels/dropout_math.h"
#include "core/kernels/flash2_backward.h"
#include "core/kernels/flash2_forward.h"

namespace mtnlg {

namespace {

namespace f2 = kernels::flash2;
namespace fl = kernels::flash;

template <typename T, int HD, int kM>
__global__ void __launch_bounds__(f2::kThreads) flash2_forward_kernel(fl::ForwardArgs<T> a) {
  extern __shared__ __align__(16) char flash2_smem[];
  WarpExec w;
  const int64_t rb = static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x;
  f2::forward_thread<T, HD, kM>(w, flash2_smem, a, blockIdx.z, blockIdx.y, rb);
}

template <typename T, int HD>
__global__ void __launch_bounds__(f2::kThreads) flash2_dq_kernel(fl::BackwardArgs<T> a) {
  extern __shared__ __align__(16) char flash2_smem[];
  WarpExec w;
  const int64_t rb = static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x;
  f2::dq_thread<T, HD>(w, flash2_smem, a, blockIdx.z, blockIdx.y, rb);
}

template <typename T, int HD>
__global__ void __launch_bounds__(f2::kThreads) flash2_dkv_kernel(fl::BackwardArgs<T> a) {
  extern __shared__ __align__(16) char flash2_smem[];
  WarpExec w;
  // The first key blocks are seen by the most query rows, and come first already.
  f2::dkv_thread<T, HD>(w, flash2_smem, a, blockIdx.z, blockIdx.y, blockIdx.x);
}

template <typename T, int HD>
__global__ void __launch_bounds__(f2::kThreads) flash2_prep_kernel(fl::BackwardArgs<T> a) {
  WarpExec w;
  // The last query blocks draw the most keep words (a word per 32 keys they see): first.
  const int64_t rb = static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x;
  f2::prep_thread<T, HD>(w, a, blockIdx.z, blockIdx.y, rb);
}

template <typename T, int HD>
__global__ void __launch_bounds__(f2::kThreads) flash2_dq_stored_kernel(fl::BackwardArgs<T> a) {
  extern __shared__ __align__(16) char flash2_smem[];
  WarpExec w;
  const int64_t rb = static_cast<int64_t>(gridDim.x) - 1 - blockIdx.x;
  f2::dq_stored_thread<T, HD>(w, flash2_smem, a, blockIdx.z, blockIdx.y, rb);
}

// Calls f with the head size as a compile-time constant: the sizes f2::head_dim_supported takes
// (flash2_attention_applies has checked it).
template <typename F>
void with_head_dim(int64_t hd, F&& f) {
  switch (hd) {
    case 64:
      f(std::integral_constant<int, 64>{});
      break;
    case 128:
      f(std::integral_constant<int, 128>{});
      break;
    default:
      f(std::integral_constant<int, 160>{});
      break;
  }
}

template <typename K, typename Args>
void launch(K kernel, int64_t blocks, size_t smem, const Args& a, cudaStream_t stream) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(smem)));
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(a.d.heads),
                  static_cast<unsigned>(a.d.b));
  kernel<<<grid, f2::kThreads, smem, stream>>>(a);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

bool flash2_attention_applies(const FlashDevice& dev, const Tensor& qkv, int64_t heads,
                              std::initializer_list<const Tensor*> operands) {
  if (dev.compute_major < 8) return false;
  if (qkv.dtype() != DType::kBF16 && qkv.dtype() != DType::kF16) return false;
  if (qkv.ndim() != 3 || heads <= 0 || qkv.dim(2) % (3 * heads) != 0) return false;
  const int64_t hd = qkv.dim(2) / (3 * heads);
  if (!f2::head_dim_supported(hd)) return false;
  if (qkv.dim(0) > 65535 || heads > 65535) return false;
  // Either forward (64- or 128-row blocks, MTNLG_CUDA_FLASH2_ROWS) and the backward passes
  // (either dq: recomputing dS or reading it back).
  if (std::max({f2::smem_bytes<Bf16>(hd, 1), f2::smem_bytes<Bf16>(hd, 2),
                f2::backward_smem_bytes<Bf16>(hd), f2::dq_stored_smem_bytes<Bf16>(hd)}) >
      dev.max_smem_optin)
    return false;
  // 16-byte loads of every row (and 4-byte stores of pairs).
  for (const Tensor* t : operands)
    if (!aligned16(t->data())) return false;
  return aligned16(qkv.data());
}

void flash2_forward_cuda(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads,
                         double dropout_p, RngStream rng, bool wide_rows, cudaStream_t stream) {
  const fl::Dims d = flash_dims(qkv, heads);
  if (d.b == 0 || d.s == 0) return;
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    const fl::ForwardArgs<T> a = flash_forward_args<T>(out, stats, qkv, heads, dropout_p, rng);
    const auto go = [&](auto hd_tag, auto m_tag) {
      constexpr int kHd = decltype(hd_tag)::value, kM = decltype(m_tag)::value;
      launch(flash2_forward_kernel<T, kHd, kM>, f2::forward_blocks(d.s, kM),
             f2::smem_bytes<T>(kHd, kM), a, stream);
    };
    using M1 = std::integral_constant<int, 1>;
    using M2 = std::integral_constant<int, 2>;
    const auto rows = [&](auto hd_tag) {
      if (wide_rows)
        go(hd_tag, M2{});
      else
        go(hd_tag, M1{});
    };
    with_head_dim(d.hd, rows);
  };
  if (qkv.dtype() == DType::kBF16)
    run(Bf16{});
  else
    run(F16{});
}

void flash2_backward_cuda(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                          const Tensor& stats, int64_t heads, double dropout_p, RngStream rng,
                          bool stored_ds, Workspace& ws, cudaStream_t stream) {
  const fl::Dims d = flash_dims(qkv, heads);
  if (d.b == 0 || d.s == 0) return;
  const bool dropout = dropout_p > 0.0;
  // delta [b, heads, s], then with dropout the keep bits (flash2_backward.h keep_words), then
  // with dS stored dS^T from ds_offset.
  char* scratch = static_cast<char*>(ws.get(
      static_cast<size_t>(f2::backward_scratch_bytes(d.b, d.heads, d.s, dropout, stored_ds))));
  auto* delta = reinterpret_cast<float*>(scratch);
  auto* keep = dropout ? reinterpret_cast<uint32_t*>(delta + d.b * d.heads * d.s) : nullptr;
  const auto run = [&](auto tag) {
    using T = decltype(tag);
    fl::BackwardArgs<T> a =
        flash_backward_args<T>(dqkv, dout, qkv, out, stats, heads, dropout_p, rng, delta, keep);
    const int64_t blocks = f2::backward_blocks(d.s);
    const auto go = [&](auto hd_tag) {
      constexpr int kHd = decltype(hd_tag)::value;
      if (!stored_ds) {
        // dq (and delta) for every query block, then dk and dv: one stream orders them.
        launch(flash2_dq_kernel<T, kHd>, blocks, f2::backward_smem_bytes<T>(kHd), a, stream);
        launch(flash2_dkv_kernel<T, kHd>, blocks, f2::backward_smem_bytes<T>(kHd), a, stream);
        return;
      }
      // delta and the keep bits, then dk and dv (storing dS^T), then dq from dS^T.
      a.ds = reinterpret_cast<T*>(scratch + f2::ds_offset(d.b, d.heads, d.s, dropout));
      a.ld_ds = f2::ds_ld(d.s);
      launch(flash2_prep_kernel<T, kHd>, blocks, 0, a, stream);
      launch(flash2_dkv_kernel<T, kHd>, blocks, f2::backward_smem_bytes<T>(kHd), a, stream);
      launch(flash2_dq_stored_kernel<T, kHd>, blocks, f2::dq_stored_smem_bytes<T>(kHd), a, stream);
    };
    with_head_dim(d.hd, go);
  };
  if (dqkv.dtype() == DType::kBF16)
    run(Bf16{});
  else
    run(F16{});
}

}  // namespace mtnlg
