// Reductions on CUDA: sum of squares (in double, two deterministic passes) and the bias
// gradient (a column sum). Fixed grids and a fixed combine order make both bit-reproducible
// run to run; no atomics.
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"

namespace mtnlg {

namespace {

static_assert(kCudaBlock == 256, "block_sum assumes 256 threads");

// Sum of `v` over the block, valid in thread 0.
__device__ double block_sum(double v) {
  __shared__ double partial[kCudaBlock];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kCudaBlock / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  return partial[0];
}

// Pass 1: each block writes its partial sum of squares to partials[blockIdx.x].
template <typename T>
__global__ void sum_squares_partial_kernel(double* partials, const T* x, int64_t n) {
  double acc = 0.0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const double xi = static_cast<double>(x[i]);
    acc += xi * xi;
  }
  const double total = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// Pass 2: one block adds the partials into *out.
__global__ void sum_partials_kernel(double* out, const double* partials, int count) {
  double acc = 0.0;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += kCudaBlock) acc += partials[i];
  const double total = block_sum(acc);
  if (threadIdx.x == 0) *out = total;
}

// One thread per column walks the rows; neighbouring threads read neighbouring columns, so the
// loads coalesce. Enough for a shell; a split-row version comes with the CUDA backend issue.
template <typename T>
__global__ void bias_backward_kernel(T* dbias, const T* dy, int64_t rows, int64_t cols) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  T acc = 0;
  for (int64_t r = 0; r < rows; ++r) acc += dy[r * cols + col];
  dbias[col] += acc;
}

}  // namespace

double sum_squares_cuda(const Tensor& x, double* scratch, cudaStream_t stream) {
  const int64_t n = x.numel();
  if (n == 0) return 0.0;
  // Leave the last scratch slot for the final sum.
  const unsigned blocks =
      std::min<unsigned>(cuda_grid(n), static_cast<unsigned>(kSumSquaresScratch - 1));
  dispatch_floating(x.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    sum_squares_partial_kernel<<<blocks, kCudaBlock, 0, stream>>>(scratch, x.data_as<T>(), n);
  });
  CUDA_CHECK(cudaGetLastError());
  double* result = scratch + (kSumSquaresScratch - 1);
  sum_partials_kernel<<<1, kCudaBlock, 0, stream>>>(result, scratch, static_cast<int>(blocks));
  CUDA_CHECK(cudaGetLastError());
  double host = 0.0;
  CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof(double), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

void bias_backward_cuda(Tensor& dbias, const Tensor& dy, cudaStream_t stream) {
  const int64_t cols = dbias.numel();
  if (cols == 0) return;
  const int64_t rows = dy.numel() / cols;
  const unsigned blocks = static_cast<unsigned>((cols + kCudaBlock - 1) / kCudaBlock);
  dispatch_floating(dbias.dtype(), "bias_backward", [&](auto tag) {
    using T = decltype(tag);
    bias_backward_kernel<<<blocks, kCudaBlock, 0, stream>>>(dbias.data_as<T>(), dy.data_as<T>(),
                                                            rows, cols);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mtnlg
