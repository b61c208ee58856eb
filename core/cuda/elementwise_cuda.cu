// Elementwise CUDA kernels: fill, f32<->f64 conversion, add, axpy, scale, add_bias.
// Grid-stride loops over int64 indices, so any numel works with a capped grid.
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"

namespace mtnlg {

namespace {

__device__ __forceinline__ int64_t first_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

template <typename T>
__global__ void fill_kernel(T* t, T value, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) t[i] = value;
}

template <typename D, typename S>
__global__ void convert_kernel(D* dst, const S* src, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = static_cast<D>(src[i]);
}

template <typename T>
__global__ void add_kernel(T* out, const T* a, const T* b, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = a[i] + b[i];
}

template <typename T>
__global__ void axpy_kernel(T* y, const T* x, T alpha, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] += alpha * x[i];
}

template <typename T>
__global__ void scale_kernel(T* x, T alpha, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) x[i] *= alpha;
}

template <typename T>
__global__ void add_bias_kernel(T* y, const T* bias, int64_t n, int64_t c) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) y[i] += bias[i % c];
}

}  // namespace

void fill_cuda(Tensor& t, double value, cudaStream_t stream) {
  const int64_t n = t.numel();
  if (n == 0) return;
  if (t.dtype() == DType::kI32) {
    fill_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(t.data_as<int32_t>(),
                                                         static_cast<int32_t>(value), n);
  } else {
    dispatch_floating(t.dtype(), "fill", [&](auto tag) {
      using T = decltype(tag);
      fill_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(t.data_as<T>(), static_cast<T>(value),
                                                           n);
    });
  }
  CUDA_CHECK(cudaGetLastError());
}

void convert_cuda(Tensor& dst, const Tensor& src, cudaStream_t stream) {
  const int64_t n = src.numel();
  if (n == 0) return;
  if (dst.dtype() == DType::kF64 && src.dtype() == DType::kF32) {
    convert_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(dst.data_as<double>(),
                                                            src.data_as<float>(), n);
  } else if (dst.dtype() == DType::kF32 && src.dtype() == DType::kF64) {
    convert_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(dst.data_as<float>(),
                                                            src.data_as<double>(), n);
  } else {
    throw unsupported(std::string("copy from ") + dtype_name(src.dtype()) + " to " +
                      dtype_name(dst.dtype()) + " on CUDA: only f32<->f64 convert");
  }
  CUDA_CHECK(cudaGetLastError());
}

void add_cuda(Tensor& out, const Tensor& a, const Tensor& b, cudaStream_t stream) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_floating(out.dtype(), "add", [&](auto tag) {
    using T = decltype(tag);
    add_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(out.data_as<T>(), a.data_as<T>(),
                                                        b.data_as<T>(), n);
  });
  CUDA_CHECK(cudaGetLastError());
}

void axpy_cuda(Tensor& y, const Tensor& x, double alpha, cudaStream_t stream) {
  const int64_t n = y.numel();
  if (n == 0) return;
  dispatch_floating(y.dtype(), "axpy", [&](auto tag) {
    using T = decltype(tag);
    axpy_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(y.data_as<T>(), x.data_as<T>(),
                                                         static_cast<T>(alpha), n);
  });
  CUDA_CHECK(cudaGetLastError());
}

void scale_cuda(Tensor& x, double alpha, cudaStream_t stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_floating(x.dtype(), "scale", [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(x.data_as<T>(), static_cast<T>(alpha), n);
  });
  CUDA_CHECK(cudaGetLastError());
}

void add_bias_cuda(Tensor& y, const Tensor& bias, cudaStream_t stream) {
  const int64_t n = y.numel();
  const int64_t c = bias.numel();
  if (n == 0) return;
  dispatch_floating(y.dtype(), "add_bias", [&](auto tag) {
    using T = decltype(tag);
    add_bias_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(y.data_as<T>(), bias.data_as<T>(), n,
                                                             c);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mtnlg
