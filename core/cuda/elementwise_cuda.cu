// Elementwise CUDA kernels: fill, conversions between f32/f64/bf16/f16, add, axpy, scale,
// add_bias. Grid-stride loops over int64 indices, so any numel works with a capped grid.
// Elements are read as their storage type T, computed in acc_t<T> and rounded once on write,
// as the CPU kernels do.
#include <algorithm>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"

namespace mtnlg {

namespace {

template <typename T>
__global__ void fill_kernel(T* t, T value, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) t[i] = value;
}

template <typename D, typename S>
__global__ void convert_kernel(D* dst, const S* src, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) dst[i] = convert_element<D>(src[i]);
}

template <typename T>
__global__ void add_kernel(T* out, const T* a, const T* b, int64_t n) {
  using A = acc_t<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride())
    out[i] = static_cast<T>(static_cast<A>(a[i]) + static_cast<A>(b[i]));
}

template <typename T>
__global__ void axpy_kernel(T* y, const T* x, acc_t<T> alpha, int64_t n) {
  using A = acc_t<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride())
    y[i] = static_cast<T>(static_cast<A>(y[i]) + alpha * static_cast<A>(x[i]));
}

template <typename T>
__global__ void scale_kernel(T* x, acc_t<T> alpha, int64_t n) {
  using A = acc_t<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride())
    x[i] = static_cast<T>(static_cast<A>(x[i]) * alpha);
}

// Columns across x (threads), rows across y: no per-element 64-bit modulo, which costs more
// than the memory traffic on a GPU.
template <typename T>
__global__ void add_bias_kernel(T* y, const T* bias, int64_t rows, int64_t c) {
  using A = acc_t<T>;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= c) return;
  const A b = static_cast<A>(bias[j]);
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    y[r * c + j] = static_cast<T>(static_cast<A>(y[r * c + j]) + b);
}

// add_bias_kernel on whole packs: x indexes packs of a row.
template <typename T>
__global__ void add_bias_packed_kernel(T* y, const T* bias, int64_t rows, int64_t c) {
  using A = acc_t<T>;
  constexpr int kN = Pack<T>::kN;
  const int64_t j = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kN;
  if (j >= c) return;
  const Pack<T> b = load_pack(bias + j);
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    Pack<T> v = load_pack(y + r * c + j);
    for (int k = 0; k < kN; ++k)
      v.v[k] = static_cast<T>(static_cast<A>(v.v[k]) + static_cast<A>(b.v[k]));
    store_pack(y + r * c + j, v);
  }
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
      const T v = static_cast<T>(static_cast<acc_t<T>>(value));
      fill_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(t.data_as<T>(), v, n);
    });
  }
  CUDA_CHECK(cudaGetLastError());
}

void convert_cuda(Tensor& dst, const Tensor& src, cudaStream_t stream) {
  const int64_t n = src.numel();
  if (n == 0) return;
  dispatch_floating(dst.dtype(), "copy", [&](auto dtag) {
    using D = decltype(dtag);
    dispatch_floating(src.dtype(), "copy", [&](auto stag) {
      using S = decltype(stag);
      convert_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(dst.data_as<D>(), src.data_as<S>(),
                                                              n);
    });
  });
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
                                                         static_cast<acc_t<T>>(alpha), n);
  });
  CUDA_CHECK(cudaGetLastError());
}

void scale_cuda(Tensor& x, double alpha, cudaStream_t stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_floating(x.dtype(), "scale", [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(x.data_as<T>(),
                                                          static_cast<acc_t<T>>(alpha), n);
  });
  CUDA_CHECK(cudaGetLastError());
}

void add_bias_cuda(Tensor& y, const Tensor& bias, cudaStream_t stream) {
  const int64_t n = y.numel();
  const int64_t c = bias.numel();
  if (n == 0) return;
  dispatch_floating(y.dtype(), "add_bias", [&](auto tag) {
    using T = decltype(tag);
    const int64_t rows = n / c;
    const unsigned grid_rows = static_cast<unsigned>(std::min<int64_t>(rows, 1024));
    if (packed<T>(c, {y.data(), bias.data()})) {
      const int64_t packs = c / Pack<T>::kN;
      const dim3 grid(static_cast<unsigned>((packs + kCudaBlock - 1) / kCudaBlock), grid_rows);
      add_bias_packed_kernel<<<grid, kCudaBlock, 0, stream>>>(y.data_as<T>(), bias.data_as<T>(),
                                                              rows, c);
    } else {
      const dim3 grid(static_cast<unsigned>((c + kCudaBlock - 1) / kCudaBlock), grid_rows);
      add_bias_kernel<<<grid, kCudaBlock, 0, stream>>>(y.data_as<T>(), bias.data_as<T>(), rows, c);
    }
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mtnlg
