// The CUDA kernel launchers behind CudaBackend (core/cuda/cuda_backend.cu), one section per
// .cu file. Each launcher has the Backend method's name plus `_cuda`, its arguments, and the
// stream it enqueues on; semantics (accumulate vs overwrite, aliasing) are as in core/backend.h.
// Preconditions (devices, dtypes, shapes) are checked by CudaBackend before the call. Launchers
// are asynchronous unless they return a host value. Thread safety: as the stream's.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "core/backend.h"
#include "core/tensor.h"

namespace mtnlg {

// ---- elementwise_cuda.cu ----
// t[i] = value (f32, f64, i32)
void fill_cuda(Tensor& t, double value, cudaStream_t stream);
// dst[i] = src[i] converted between f32 and f64; both on the device, same numel.
void convert_cuda(Tensor& dst, const Tensor& src, cudaStream_t stream);
void add_cuda(Tensor& out, const Tensor& a, const Tensor& b, cudaStream_t stream);
void axpy_cuda(Tensor& y, const Tensor& x, double alpha, cudaStream_t stream);
void scale_cuda(Tensor& x, double alpha, cudaStream_t stream);
// y[n, c] += bias[c]
void add_bias_cuda(Tensor& y, const Tensor& bias, cudaStream_t stream);

// ---- reduce_cuda.cu ----
// sum of x[i]^2 accumulated in double; `scratch` holds kSumSquaresScratch doubles on the
// device. Synchronizes the stream to return the value.
constexpr int kSumSquaresScratch = 1024;
double sum_squares_cuda(const Tensor& x, double* scratch, cudaStream_t stream);
// dbias[c] += sum_n dy[n, c]
void bias_backward_cuda(Tensor& dbias, const Tensor& dy, cudaStream_t stream);

// ---- gemm_cuda.cu ----
// c[m, n] = alpha * op(a) @ op(b) + beta * c (row-major), via cublasGemmEx on `handle`'s stream.
void gemm_cuda(cublasHandle_t handle, Tensor& c, const Tensor& a, bool trans_a, const Tensor& b,
               bool trans_b, double alpha, double beta);

// ---- gelu_cuda.cu ----
void gelu_forward_cuda(Tensor& out, const Tensor& in, Activation act, cudaStream_t stream);
void gelu_backward_cuda(Tensor& din, const Tensor& dout, const Tensor& in, Activation act,
                        cudaStream_t stream);

// ---- dropout_cuda.cu ----
// out = in * keep / (1 - p), keep = dropout_keep(rng, i) (core/rng.h), the CPU's stream.
void dropout_forward_cuda(Tensor& out, const Tensor& in, double p, RngStream rng,
                          cudaStream_t stream);
void dropout_backward_cuda(Tensor& din, const Tensor& dout, double p, RngStream rng,
                           cudaStream_t stream);

// ---- adamw_cuda.cu ----
void adamw_update_cuda(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                       const AdamWArgs& args, cudaStream_t stream);

}  // namespace mtnlg
