// Elementwise CUDA kernels: fill, conversions between f32/f64/bf16/f16, add, axpy, scale,
// add_bias; store_words (a few words written by value). Grid-stride loops over int64 indices, so
// any numel works with a capped grid. Elements are read as their storage type T, computed in
// acc_t<T> and rounded once on write, as the CPU kernels do.
#include <algorithm>
#include <array>
#include <cstdint>

#include "core/cuda/cuda_backend_impl.h"
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

// out[i] = op(in0[i], in1[i]) over [0, n), computed in acc_t<T>, rounded once on write: whole
// packs (16 bytes, one load a lane per operand) when `packs` is set (every pointer 16-byte aligned,
// the launcher's packed()), then the tail element by element. The same arithmetic per element
// either way, so the bits do not depend on the layout. A unary op ignores in1 (pass in0).
template <typename T, typename Op>
__global__ void map2_kernel(T* out, const T* in0, const T* in1, int64_t n, bool packs, Op op) {
  using A = acc_t<T>;
  constexpr int kN = Pack<T>::kN;
  const int64_t whole = packs ? n / kN : 0;
  for (int64_t q = first_index(); q < whole; q += grid_stride()) {
    const Pack<T> x = load_pack(in0 + q * kN);
    const Pack<T> y = in1 == in0 ? x : load_pack(in1 + q * kN);  // a unary op reads once
    Pack<T> r;
#pragma unroll
    for (int k = 0; k < kN; ++k)
      r.v[k] = static_cast<T>(op(static_cast<A>(x.v[k]), static_cast<A>(y.v[k])));
    store_pack(out + q * kN, r);
  }
  for (int64_t i = whole * kN + first_index(); i < n; i += grid_stride())
    out[i] = static_cast<T>(op(static_cast<A>(in0[i]), static_cast<A>(in1[i])));
}

template <typename A>
struct AddOp {
  __device__ A operator()(A x, A y) const { return x + y; }
};
template <typename A>
struct AxpyOp {  // y + alpha x
  A alpha;
  __device__ A operator()(A y, A x) const { return y + alpha * x; }
};
template <typename A>
struct ScaleOp {  // x alpha (unary: the second operand is ignored)
  A alpha;
  __device__ A operator()(A x, A) const { return x * alpha; }
};

// Launches map2_kernel over n elements: packed when every pointer allows it.
template <typename T, typename Op>
void map2(T* out, const T* in0, const T* in1, int64_t n, cudaStream_t stream, Op op) {
  const bool packs = aligned16({out, in0, in1});
  const int64_t threads = packs ? n / Pack<T>::kN + n % Pack<T>::kN : n;
  map2_kernel<<<cuda_grid(threads), kCudaBlock, 0, stream>>>(out, in0, in1, n, packs, op);
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

// Four words by value (a struct argument: the launch copies it, so the caller's copy may go).
struct Words {
  int64_t w[4];
};
__global__ void store_words_kernel(int64_t* dst, Words words, int count) {
  if (static_cast<int>(threadIdx.x) < count) dst[threadIdx.x] = words.w[threadIdx.x];
}

__global__ void store_cudnn_seed_offset_kernel(int64_t* dst, RngStream rng) {
  if (threadIdx.x != 0) return;
  uint64_t z = rng.seed + 0x9E3779B97F4A7C15ull * (stream_word(rng) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  dst[0] = static_cast<int64_t>(z ^ (z >> 31));
  dst[1] = 0;
  dst[2] = static_cast<int64_t>(rng.offset);
  dst[3] = 0;
}

}  // namespace

void store_cudnn_seed_offset_cuda(int64_t* words, RngStream rng, cudaStream_t stream) {
  store_cudnn_seed_offset_kernel<<<1, 32, 0, stream>>>(words, rng);
  CUDA_CHECK(cudaGetLastError());
}

void store_words_cuda(int64_t* dst, const std::array<int64_t, 4>& words, cudaStream_t stream,
                      int count) {
  MTNLG_CHECK(count >= 0 && count <= 4);
  store_words_kernel<<<1, 32, 0, stream>>>(dst, Words{{words[0], words[1], words[2], words[3]}},
                                           count);
  CUDA_CHECK(cudaGetLastError());
}

void fill_cuda(Tensor& t, double value, cudaStream_t stream) {
  const int64_t n = t.numel();
  if (n == 0) return;
  if (t.dtype() == DType::kI32) {
    fill_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(t.data_as<int32_t>(),
                                                         static_cast<int32_t>(value), n);
  } else {
    dispatch_dtype(Device::kCUDA, t.dtype(), "fill", [&](auto tag) {
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
  dispatch_dtype(Device::kCUDA, dst.dtype(), "copy", [&](auto dtag) {
    using D = decltype(dtag);
    dispatch_dtype(Device::kCUDA, src.dtype(), "copy", [&](auto stag) {
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
  dispatch_dtype(Device::kCUDA, out.dtype(), "add", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    map2(out.data_as<T>(), a.data_as<T>(), b.data_as<T>(), n, stream, AddOp<A>{});
  });
  CUDA_CHECK(cudaGetLastError());
}

void axpy_cuda(Tensor& y, const Tensor& x, double alpha, cudaStream_t stream) {
  const int64_t n = y.numel();
  if (n == 0) return;
  dispatch_dtype(Device::kCUDA, y.dtype(), "axpy", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    map2(y.data_as<T>(), y.data_as<T>(), x.data_as<T>(), n, stream,
         AxpyOp<A>{static_cast<A>(alpha)});
  });
  CUDA_CHECK(cudaGetLastError());
}

void scale_cuda(Tensor& x, double alpha, cudaStream_t stream) {
  const int64_t n = x.numel();
  if (n == 0) return;
  dispatch_dtype(Device::kCUDA, x.dtype(), "scale", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    map2(x.data_as<T>(), x.data_as<T>(), x.data_as<T>(), n, stream,
         ScaleOp<A>{static_cast<A>(alpha)});
  });
  CUDA_CHECK(cudaGetLastError());
}

void add_bias_cuda(Tensor& y, const Tensor& bias, cudaStream_t stream) {
  const int64_t n = y.numel();
  const int64_t c = bias.numel();
  if (n == 0) return;
  dispatch_dtype(Device::kCUDA, y.dtype(), "add_bias", [&](auto tag) {
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

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CudaBackend::do_fill(Tensor& t, double value) {
  fill_cuda(t, value, stream());
}

void CudaBackend::do_add_bias(Tensor& y, const Tensor& bias) {
  add_bias_cuda(y, bias, stream());
}

void CudaBackend::do_add(Tensor& out, const Tensor& a, const Tensor& b) {
  add_cuda(out, a, b, stream());
}

void CudaBackend::do_axpy(Tensor& y, const Tensor& x, double alpha) {
  axpy_cuda(y, x, alpha, stream());
}

void CudaBackend::do_scale(Tensor& x, double alpha) {
  scale_cuda(x, alpha, stream());
}

}  // namespace mtnlg
