// Reductions on CUDA: sum of squares (in double, two deterministic passes) and the bias
// gradient (a column sum, core/cuda/column_sum_cuda.cuh). Fixed grids and a fixed combine order
// make both bit-reproducible run to run; no atomics.
#include <cstdint>
#include <vector>

#include "core/cuda/column_sum_cuda.cuh"
#include "core/cuda/cuda_backend_impl.h"
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
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const double xi = static_cast<double>(static_cast<acc_t<T>>(x[i]));
    acc += xi * xi;
  }
  const double total = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// Pass 2: one block adds the partials into *out (where not null), and adds that sum into
// *add_to (where not null: a running total kept on the device).
__global__ void sum_partials_kernel(double* out, const double* partials, int64_t count,
                                    double* add_to) {
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += kCudaBlock) acc += partials[i];
  const double total = block_sum(acc);
  if (threadIdx.x == 0) {
    if (out != nullptr) *out = total;
    if (add_to != nullptr) *add_to += total;
  }
}

template <typename T>
struct BiasTerm {
  const T* dy;
  int64_t cols;
  __device__ void operator()(int64_t r, int64_t j, acc_t<T>* acc) const {
    acc[0] += static_cast<acc_t<T>>(dy[r * cols + j]);
  }
  __device__ void pack(int64_t r, int64_t j0, acc_t<T> (*acc)[Pack<T>::kN]) const {
    const Pack<T> v = load_pack(dy + r * cols + j0);
    for (int k = 0; k < Pack<T>::kN; ++k) acc[0][k] += static_cast<acc_t<T>>(v.v[k]);
  }
};

}  // namespace

double sum_doubles_cuda(const double* values, int64_t count, double* result, cudaStream_t stream) {
  sum_partials_kernel<<<1, kCudaBlock, 0, stream>>>(result, values, count, nullptr);
  CUDA_CHECK(cudaGetLastError());
  double host = 0.0;
  CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof(double), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

void add_sum_of_doubles_cuda(const double* values, int64_t count, double* total,
                             cudaStream_t stream) {
  sum_partials_kernel<<<1, kCudaBlock, 0, stream>>>(nullptr, values, count, total);
  CUDA_CHECK(cudaGetLastError());
}

namespace {

// Blocks of the first pass for n elements (leaving one scratch slot for the final sum).
unsigned sum_squares_blocks(int64_t n) {
  return std::min<unsigned>(cuda_grid(n), static_cast<unsigned>(kSumSquaresScratch - 1));
}

void sum_squares_partials(const Tensor& x, double* partials, cudaStream_t stream) {
  const int64_t n = x.numel();
  dispatch_dtype(Device::kCUDA, x.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    sum_squares_partial_kernel<<<sum_squares_blocks(n), kCudaBlock, 0, stream>>>(partials,
                                                                                 x.data_as<T>(), n);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

double sum_squares_cuda(const Tensor& x, double* scratch, cudaStream_t stream) {
  const int64_t n = x.numel();
  if (n == 0) return 0.0;
  sum_squares_partials(x, scratch, stream);
  return sum_doubles_cuda(scratch, sum_squares_blocks(n), scratch + (kSumSquaresScratch - 1),
                          stream);
}

namespace {

// Where each tensor's first-pass partials start in the workspace; the last entry is their count.
std::vector<int64_t> partial_offsets(const std::vector<Tensor>& xs) {
  std::vector<int64_t> offset(xs.size() + 1, 0);
  for (size_t i = 0; i < xs.size(); ++i)
    offset[i + 1] = offset[i] + (xs[i].numel() ? sum_squares_blocks(xs[i].numel()) : 0);
  return offset;
}

// Each tensor's partials (at buf + offset[i]) and final sum (results[i]) exactly as
// sum_squares_cuda makes them: the same values bit for bit.
void sum_squares_each(const std::vector<Tensor>& xs, const std::vector<int64_t>& offset,
                      double* buf, double* results, cudaStream_t stream) {
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i].numel() == 0) {
      CUDA_CHECK(cudaMemsetAsync(results + i, 0, sizeof(double), stream));
      continue;
    }
    sum_squares_partials(xs[i], buf + offset[i], stream);
    sum_partials_kernel<<<1, kCudaBlock, 0, stream>>>(results + i, buf + offset[i],
                                                      offset[i + 1] - offset[i], nullptr);
    CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace

void sum_squares_into_cuda(const std::vector<Tensor>& xs, double* results, Workspace& ws,
                           cudaStream_t stream) {
  if (xs.empty()) return;
  const std::vector<int64_t> offset = partial_offsets(xs);
  double* buf = static_cast<double*>(
      ws.get(static_cast<size_t>(std::max<int64_t>(offset.back(), 1)) * sizeof(double)));
  sum_squares_each(xs, offset, buf, results, stream);
}

std::vector<double> sum_squares_many_cuda(const std::vector<Tensor>& xs, Workspace& ws,
                                          cudaStream_t stream) {
  // The partials and the sums side by side in the workspace; one copy back, one wait.
  std::vector<double> host(xs.size(), 0.0);
  if (xs.empty()) return host;
  const std::vector<int64_t> offset = partial_offsets(xs);
  double* buf = static_cast<double*>(
      ws.get(static_cast<size_t>(offset.back() + std::ssize(xs) + 1) * sizeof(double)));
  double* results = buf + offset.back();
  sum_squares_each(xs, offset, buf, results, stream);
  CUDA_CHECK(cudaMemcpyAsync(host.data(), results, host.size() * sizeof(double),
                             cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

void bias_backward_cuda(Tensor& dbias, const Tensor& dy, Workspace& ws, cudaStream_t stream) {
  const int64_t cols = dbias.numel();
  if (cols == 0) return;
  const int64_t rows = dy.numel() / cols;
  dispatch_dtype(Device::kCUDA, dy.dtype(), "bias_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const cuda::ColumnSumPlan plan = cuda::column_sum_plan<T>(rows, cols);
    A* partial = static_cast<A*>(ws.get(plan.partial_elements() * sizeof(A)));
    cuda::column_sums<A, Pack<T>::kN, 1>(plan, {{dbias.data_as<A>()}},
                                         BiasTerm<T>{dy.data_as<T>(), cols},
                                         packed<T>(cols, {dy.data()}), partial, stream);
  });
}

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CudaBackend::do_bias_backward(Tensor& dbias, const Tensor& dy) {
  bias_backward_cuda(dbias, dy, ws_, stream());
}

double CudaBackend::do_sum_squares(const Tensor& x) {
  return with_id_checks([&] { return sum_squares_cuda(x, sum_scratch(), stream()); });
}

std::vector<double> CudaBackend::do_sum_squares_many(const std::vector<Tensor>& xs) {
  return with_id_checks([&] { return sum_squares_many_cuda(xs, ws_, stream()); });
}

void CudaBackend::do_sum_squares_into(Tensor& sums, const std::vector<Tensor>& xs) {
  sum_squares_into_cuda(xs, sums.data_as<double>(), ws_, stream());
}

}  // namespace mtnlg
