// GeLU forward and backward on CUDA: CudaBackend's gelu_forward, gelu_backward and
// gelu_bias_backward, their launchers and kernels; the per-element math is
// core/kernels/gelu_math.h, the same functions the CPU kernels call.
#include <cstdint>

#include "core/cuda/column_sum_cuda.cuh"
#include "core/cuda/cuda_backend_impl.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"
#include "core/kernels/gelu_math.h"

namespace mtnlg {

namespace {

template <typename T, bool kTanh>
__global__ void gelu_forward_kernel(T* out, const T* in, int64_t n) {
  using A = acc_t<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const A x = static_cast<A>(in[i]);
    out[i] = static_cast<T>(kTanh ? kernels::gelu_tanh(x) : kernels::gelu_erf(x));
  }
}

// din may alias dout: each element reads its dout before writing its din.
template <typename T, bool kTanh>
__global__ void gelu_backward_kernel(T* din, const T* dout, const T* in, int64_t n) {
  using A = acc_t<T>;
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const A x = static_cast<A>(in[i]);
    const A grad = kTanh ? kernels::gelu_tanh_grad(x) : kernels::gelu_erf_grad(x);
    din[i] = static_cast<T>(static_cast<A>(dout[i]) * grad);
  }
}

// The same on whole packs (n a multiple of the pack, 16-byte aligned): index i counts packs.
template <typename T, bool kTanh>
__global__ void gelu_forward_packed_kernel(T* out, const T* in, int64_t packs) {
  using A = acc_t<T>;
  constexpr int kN = Pack<T>::kN;
  for (int64_t i = first_index(); i < packs; i += grid_stride()) {
    const Pack<T> x = load_pack(in + i * kN);
    Pack<T> y;
    for (int k = 0; k < kN; ++k) {
      const A v = static_cast<A>(x.v[k]);
      y.v[k] = static_cast<T>(kTanh ? kernels::gelu_tanh(v) : kernels::gelu_erf(v));
    }
    store_pack(out + i * kN, y);
  }
}

template <typename T, bool kTanh>
__global__ void gelu_backward_packed_kernel(T* din, const T* dout, const T* in, int64_t packs) {
  using A = acc_t<T>;
  constexpr int kN = Pack<T>::kN;
  for (int64_t i = first_index(); i < packs; i += grid_stride()) {
    const Pack<T> x = load_pack(in + i * kN), dy = load_pack(dout + i * kN);
    Pack<T> dx;
    for (int k = 0; k < kN; ++k) {
      const A v = static_cast<A>(x.v[k]);
      const A grad = kTanh ? kernels::gelu_tanh_grad(v) : kernels::gelu_erf_grad(v);
      dx.v[k] = static_cast<T>(static_cast<A>(dy.v[k]) * grad);
    }
    store_pack(din + i * kN, dx);
  }
}

// One element of gelu_backward (the kernels' arithmetic) stored, and added to its column's sum
// as stored (bias_backward_cuda's BiasTerm of the result): column_sums visits every element
// once. din may alias dout: the element is read before it is written.
template <typename T, bool kTanh>
struct GeluBiasTerm {
  T* din;
  const T* dout;
  const T* in;
  int64_t cols;
  __device__ void operator()(int64_t r, int64_t j, acc_t<T>* acc) const {
    using A = acc_t<T>;
    const int64_t e = r * cols + j;
    const A x = static_cast<A>(in[e]);
    const A grad = kTanh ? kernels::gelu_tanh_grad(x) : kernels::gelu_erf_grad(x);
    const T d = static_cast<T>(static_cast<A>(dout[e]) * grad);
    din[e] = d;
    acc[0] += static_cast<A>(d);
  }
  // The same for the pack of columns from j0 (16-byte loads and store).
  __device__ void pack(int64_t r, int64_t j0, acc_t<T> (*acc)[Pack<T>::kN]) const {
    using A = acc_t<T>;
    const int64_t e = r * cols + j0;
    const Pack<T> x = load_pack(in + e), dy = load_pack(dout + e);
    Pack<T> dx;
    for (int k = 0; k < Pack<T>::kN; ++k) {
      const A v = static_cast<A>(x.v[k]);
      const A grad = kTanh ? kernels::gelu_tanh_grad(v) : kernels::gelu_erf_grad(v);
      dx.v[k] = static_cast<T>(static_cast<A>(dy.v[k]) * grad);
      acc[0][k] += static_cast<A>(dx.v[k]);
    }
    store_pack(din + e, dx);
  }
};

// gelu_backward_cuda and bias_backward_cuda in one pass of the column sums' grid (each element
// computed, stored and summed by one thread): the same bits as the two.
void gelu_bias_backward_cuda(Tensor& din, Tensor& dbias, const Tensor& dout, const Tensor& in,
                             Activation act, Workspace& ws, cudaStream_t stream) {
  const int64_t cols = dbias.numel();
  if (cols == 0 || din.numel() == 0) return;
  dispatch_dtype(Device::kCUDA, din.dtype(), "gelu_bias_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const cuda::ColumnSumPlan plan = cuda::column_sum_plan<T>(din.numel() / cols, cols);
    A* partial = static_cast<A*>(ws.get(plan.partial_elements() * sizeof(A)));
    const bool pack = packed<T>(cols, {din.data(), dout.data(), in.data()});
    const auto run = [&](auto term) {
      cuda::column_sums<A, Pack<T>::kN, 1>(plan, {{dbias.data_as<A>()}}, term, pack, partial,
                                           stream);
    };
    if (act == Activation::kGeluTanh)
      run(GeluBiasTerm<T, true>{din.data_as<T>(), dout.data_as<T>(), in.data_as<T>(), cols});
    else
      run(GeluBiasTerm<T, false>{din.data_as<T>(), dout.data_as<T>(), in.data_as<T>(), cols});
  });
}

void gelu_forward_cuda(Tensor& out, const Tensor& in, Activation act, cudaStream_t stream) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_dtype(Device::kCUDA, out.dtype(), "gelu_forward", [&](auto tag) {
    using T = decltype(tag);
    if (packed<T>(n, {out.data(), in.data()})) {
      const int64_t packs = n / Pack<T>::kN;
      if (act == Activation::kGeluTanh) {
        gelu_forward_packed_kernel<T, true>
            <<<cuda_grid(packs), kCudaBlock, 0, stream>>>(out.data_as<T>(), in.data_as<T>(), packs);
      } else {
        gelu_forward_packed_kernel<T, false>
            <<<cuda_grid(packs), kCudaBlock, 0, stream>>>(out.data_as<T>(), in.data_as<T>(), packs);
      }
    } else if (act == Activation::kGeluTanh) {
      gelu_forward_kernel<T, true>
          <<<cuda_grid(n), kCudaBlock, 0, stream>>>(out.data_as<T>(), in.data_as<T>(), n);
    } else {
      gelu_forward_kernel<T, false>
          <<<cuda_grid(n), kCudaBlock, 0, stream>>>(out.data_as<T>(), in.data_as<T>(), n);
    }
  });
  CUDA_CHECK(cudaGetLastError());
}

void gelu_backward_cuda(Tensor& din, const Tensor& dout, const Tensor& in, Activation act,
                        cudaStream_t stream) {
  const int64_t n = din.numel();
  if (n == 0) return;
  dispatch_dtype(Device::kCUDA, din.dtype(), "gelu_backward", [&](auto tag) {
    using T = decltype(tag);
    if (packed<T>(n, {din.data(), dout.data(), in.data()})) {
      const int64_t packs = n / Pack<T>::kN;
      if (act == Activation::kGeluTanh) {
        gelu_backward_packed_kernel<T, true><<<cuda_grid(packs), kCudaBlock, 0, stream>>>(
            din.data_as<T>(), dout.data_as<T>(), in.data_as<T>(), packs);
      } else {
        gelu_backward_packed_kernel<T, false><<<cuda_grid(packs), kCudaBlock, 0, stream>>>(
            din.data_as<T>(), dout.data_as<T>(), in.data_as<T>(), packs);
      }
    } else if (act == Activation::kGeluTanh) {
      gelu_backward_kernel<T, true><<<cuda_grid(n), kCudaBlock, 0, stream>>>(
          din.data_as<T>(), dout.data_as<T>(), in.data_as<T>(), n);
    } else {
      gelu_backward_kernel<T, false><<<cuda_grid(n), kCudaBlock, 0, stream>>>(
          din.data_as<T>(), dout.data_as<T>(), in.data_as<T>(), n);
    }
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CudaBackend::do_gelu_forward(Tensor& out, const Tensor& in, Activation act) {
  gelu_forward_cuda(out, in, act, stream());
}

void CudaBackend::do_gelu_backward(Tensor& din, const Tensor& dout, const Tensor& in,
                                   Activation act) {
  gelu_backward_cuda(din, dout, in, act, stream());
}

void CudaBackend::do_gelu_bias_backward(Tensor& din, Tensor& dbias, const Tensor& dout,
                                        const Tensor& in, Activation act) {
  gelu_bias_backward_cuda(din, dbias, dout, in, act, ws_, stream());
}

}  // namespace mtnlg
