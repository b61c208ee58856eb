// Deterministic column sums on CUDA: out[j] += sum_r f(r, j) over rows r, for the parameter
// gradients that reduce over tokens (bias, LayerNorm weight and bias). Two passes with a grid
// fixed by the shape (row chunks into a partials buffer, then the chunks in a fixed order), so
// the sum order, and the result, are the same on every run. No atomics. Device code: include
// from .cu.
//
// The first pass reads rows in 16-byte packs where the caller's tensors allow it (Pack<T>: a
// thread's kN consecutive columns, 512 bytes a warp per row instead of 64 for 2-byte elements),
// element by element otherwise. Both paths share the plan, and so the order of every column's
// sum.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cuda/column_sum_plan.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/launch_cuda.h"

namespace mtnlg::cuda {

using mtnlg::ColumnSumPlan;

// The plan for rows x cols elements of T (its pack width): core/cuda/column_sum_plan.h.
template <typename T>
ColumnSumPlan column_sum_plan(int64_t rows, int64_t cols) {
  return mtnlg::column_sum_plan(rows, cols, Pack<T>::kN);
}

// Element by element: thread (col, chunk) adds f(r, col) over the chunk's rows in order.
template <typename A, int kTerms, typename F>
__global__ void column_partial_kernel(A* partial, F f, int64_t rows, int64_t cols,
                                      int64_t rows_per_chunk, int64_t chunks) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  if (col >= cols) return;
  A acc[kTerms] = {};
  const int64_t end = (chunk + 1) * rows_per_chunk;
  const int64_t r1 = end < rows ? end : rows;
  for (int64_t r = chunk * rows_per_chunk; r < r1; ++r) f(r, col, acc);
  for (int t = 0; t < kTerms; ++t) partial[(t * chunks + chunk) * cols + col] = acc[t];
}

// In packs: thread (pack, chunk) adds f.pack(r, j0) for its kN columns from j0 over the chunk's
// rows in order: each column's sum in the order of column_partial_kernel.
template <typename A, int kN, int kTerms, typename F>
__global__ void column_partial_packed_kernel(A* partial, F f, int64_t rows, int64_t cols,
                                             int64_t rows_per_chunk, int64_t chunks) {
  const int64_t j0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kN;
  const int64_t chunk = blockIdx.y;
  if (j0 >= cols) return;
  A acc[kTerms][kN] = {};
  const int64_t end = (chunk + 1) * rows_per_chunk;
  const int64_t r1 = end < rows ? end : rows;
  for (int64_t r = chunk * rows_per_chunk; r < r1; ++r) f.pack(r, j0, acc);
  for (int t = 0; t < kTerms; ++t)
    for (int k = 0; k < kN; ++k) partial[(t * chunks + chunk) * cols + j0 + k] = acc[t][k];
}

// Pointers to the kTerms outputs, passed by value to the finishing kernel.
template <typename A, int kTerms>
struct ColumnOuts {
  A* p[kTerms];
};

// The second pass: a block per 32 columns (a lane each), its 8 warps summing consecutive eighths
// of the chunks in order, then warp 0 adding the eight in order: a fixed order, the work spread
// over cols / 32 blocks rather than one thread per column walking every chunk.
constexpr int kFinishWarps = kCudaBlock / 32;

template <typename A, int kTerms>
__global__ void column_finish_kernel_v(ColumnOuts<A, kTerms> outs, const A* partial, int64_t cols,
                                       int64_t chunks) {
  __shared__ A sums[kTerms][kFinishWarps][32];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int64_t col = static_cast<int64_t>(blockIdx.x) * 32 + lane;
  const int64_t per = (chunks + kFinishWarps - 1) / kFinishWarps;
  const int64_t c0 = warp * per, c1 = c0 + per < chunks ? c0 + per : chunks;
  for (int t = 0; t < kTerms; ++t) {
    A acc = 0;
    if (col < cols)
      for (int64_t c = c0; c < c1; ++c) acc += partial[(t * chunks + c) * cols + col];
    sums[t][warp][lane] = acc;
  }
  __syncthreads();
  if (warp != 0 || col >= cols) return;
  for (int t = 0; t < kTerms; ++t) {
    A acc = 0;
    for (int w = 0; w < kFinishWarps; ++w) acc += sums[t][w][lane];
    outs.p[t][col] += acc;
  }
}

// outs.p[t][j] += sum_r term t of f(r, j, acc) (f adds its kTerms terms into acc[0..kTerms)).
// With `packed` (the caller's packed<T>(cols, its pointers)) the first pass calls
// f.pack(r, j0, acc) instead, acc[kTerms][plan.pack], for columns j0 .. j0 + plan.pack - 1.
// partial: plan.partial_elements() * kTerms elements of device scratch.
template <typename A, int kN, int kTerms, typename F>
void column_sums(const ColumnSumPlan& plan, ColumnOuts<A, kTerms> outs, F f, bool packed,
                 A* partial, cudaStream_t stream) {
  if (plan.rows == 0 || plan.cols == 0) return;
  static_assert(kN >= 1, "a pack of columns");
  MTNLG_CHECK_MSG(plan.pack == kN,
                  "column_sums: a plan for packs of " << plan.pack << ", not " << kN);
  const auto chunks = static_cast<unsigned>(plan.chunks);
  if (packed && plan.cols % kN == 0) {
    const int64_t packs = plan.cols / kN;
    const dim3 grid(static_cast<unsigned>((packs + kCudaBlock - 1) / kCudaBlock), chunks);
    column_partial_packed_kernel<A, kN, kTerms><<<grid, kCudaBlock, 0, stream>>>(
        partial, f, plan.rows, plan.cols, plan.rows_per_chunk, plan.chunks);
  } else {
    const dim3 grid(static_cast<unsigned>((plan.cols + kCudaBlock - 1) / kCudaBlock), chunks);
    column_partial_kernel<A, kTerms><<<grid, kCudaBlock, 0, stream>>>(
        partial, f, plan.rows, plan.cols, plan.rows_per_chunk, plan.chunks);
  }
  CUDA_CHECK(cudaGetLastError());
  column_finish_kernel_v<A, kTerms>
      <<<static_cast<unsigned>((plan.cols + 31) / 32), kCudaBlock, 0, stream>>>(
          outs, partial, plan.cols, plan.chunks);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mtnlg::cuda
