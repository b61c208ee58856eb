// Deterministic column sums on CUDA: out[j] += sum_r f(r, j) over rows r, for the parameter
// gradients that reduce over tokens (bias, LayerNorm weight and bias). Two passes with a grid
// fixed by the shape (row chunks into a partials buffer, then the chunks in order), so the sum
// order, and the result, are the same on every run. No atomics. Device code: include from .cu.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "core/cuda/launch_cuda.h"

namespace mtnlg::cuda {

struct ColumnSumPlan {
  int64_t rows, cols, chunks, rows_per_chunk;
  unsigned col_blocks;
  // Elements of A the partials buffer needs.
  int64_t partial_elements() const { return chunks * cols; }
};

inline ColumnSumPlan column_sum_plan(int64_t rows, int64_t cols) {
  ColumnSumPlan p{};
  p.rows = rows;
  p.cols = cols;
  p.col_blocks = static_cast<unsigned>((cols + kCudaBlock - 1) / kCudaBlock);
  // About 1024 blocks in the first pass fill any current GPU.
  const int64_t want = std::max<int64_t>(1, 1024 / static_cast<int64_t>(p.col_blocks));
  p.chunks = std::clamp<int64_t>(want, 1, std::max<int64_t>(rows, 1));
  p.rows_per_chunk = (rows + p.chunks - 1) / p.chunks;
  p.chunks = (rows + p.rows_per_chunk - 1) / std::max<int64_t>(p.rows_per_chunk, 1);
  if (p.chunks == 0) p.chunks = 1;
  return p;
}

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

// Pointers to the kTerms outputs, passed by value to the finishing kernel.
template <typename A, int kTerms>
struct ColumnOuts {
  A* p[kTerms];
};

template <typename A, int kTerms>
__global__ void column_finish_kernel_v(ColumnOuts<A, kTerms> outs, const A* partial, int64_t cols,
                                       int64_t chunks) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  for (int t = 0; t < kTerms; ++t) {
    A acc = 0;
    for (int64_t c = 0; c < chunks; ++c) acc += partial[(t * chunks + c) * cols + col];
    outs.p[t][col] += acc;
  }
}

// outs.p[t][j] += sum_r term t of f(r, j, acc) (f adds its kTerms terms into acc[0..kTerms)).
// partial: plan.partial_elements() * kTerms elements of device scratch.
template <typename A, int kTerms, typename F>
void column_sums(const ColumnSumPlan& plan, ColumnOuts<A, kTerms> outs, F f, A* partial,
                 cudaStream_t stream) {
  if (plan.rows == 0 || plan.cols == 0) return;
  const dim3 grid(plan.col_blocks, static_cast<unsigned>(plan.chunks));
  column_partial_kernel<A, kTerms><<<grid, kCudaBlock, 0, stream>>>(
      partial, f, plan.rows, plan.cols, plan.rows_per_chunk, plan.chunks);
  CUDA_CHECK(cudaGetLastError());
  column_finish_kernel_v<A, kTerms>
      <<<plan.col_blocks, kCudaBlock, 0, stream>>>(outs, partial, plan.cols, plan.chunks);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mtnlg::cuda
