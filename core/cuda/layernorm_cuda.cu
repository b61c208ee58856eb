// LayerNorm on CUDA, the CPU's arithmetic (core/kernels/layernorm_math.h, which
// core/cpu/layernorm_cpu.cc shares): a warp per row, the row's mean and two-pass variance in
// acc_t<T> (fp32 for bf16/fp16 rows), rounded once on write.
// The weight and bias gradients are deterministic column sums (column_sum_cuda.cuh).
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "core/cuda/column_sum_cuda.cuh"
#include "core/cuda/cuda_backend_impl.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"
#include "core/kernels/layernorm_math.h"

namespace mtnlg {

namespace {

constexpr int kRowsPerBlock = kCudaBlock / 32;

template <typename T>
__global__ void layernorm_forward_kernel(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* in,
                                         const T* w, const T* b, int64_t n, int64_t c,
                                         acc_t<T> eps) {
  using A = acc_t<T>;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= n) return;
  const T* x = in + r * c;
  A sum = 0;
  for (int64_t j = lane; j < c; j += 32) sum += static_cast<A>(x[j]);
  const A m = warp_sum(sum) / static_cast<A>(c);
  A sq = 0;
  for (int64_t j = lane; j < c; j += 32) {
    const A d = static_cast<A>(x[j]) - m;
    sq += d * d;
  }
  const A s = kernels::layernorm_rstd(warp_sum(sq), c, eps);
  T* y = out + r * c;
  for (int64_t j = lane; j < c; j += 32) {
    y[j] = static_cast<T>(kernels::layernorm_out(static_cast<A>(x[j]), m, s, static_cast<A>(w[j]),
                                                 static_cast<A>(b[j])));
  }
  if (lane == 0) {
    mean[r] = m;
    rstd[r] = s;
  }
}

// din += ... per row (a warp each); din may not alias dout.
template <typename T>
__global__ void layernorm_backward_input_kernel(T* din, const T* dout, const T* in, const T* w,
                                                const acc_t<T>* mean, const acc_t<T>* rstd,
                                                int64_t n, int64_t c) {
  using A = acc_t<T>;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= n) return;
  const T* x = in + r * c;
  const T* dy = dout + r * c;
  const A m = mean[r], s = rstd[r];
  A dmean = 0, dnorm_mean = 0;
  for (int64_t j = lane; j < c; j += 32) {
    const A dnorm = kernels::layernorm_dnorm(static_cast<A>(w[j]), static_cast<A>(dy[j]));
    dmean += dnorm;
    dnorm_mean += kernels::layernorm_dnorm_norm(dnorm, static_cast<A>(x[j]), m, s);
  }
  dmean = warp_sum(dmean) / static_cast<A>(c);
  dnorm_mean = warp_sum(dnorm_mean) / static_cast<A>(c);
  T* dx = din + r * c;
  for (int64_t j = lane; j < c; j += 32) {
    const A g = kernels::layernorm_dx(static_cast<A>(x[j]), static_cast<A>(dy[j]),
                                      static_cast<A>(w[j]), m, s, dmean, dnorm_mean);
    dx[j] = static_cast<T>(static_cast<A>(dx[j]) + g);
  }
}

// The same two kernels reading and writing 16 bytes per lane at a time (8 bf16/fp16, 4 f32):
// a warp moves 512 bytes per access instead of 64, which these memory-bound rows need. Used
// when c is a multiple of the pack and the rows are 16-byte aligned (see packed()).
template <typename T>
__global__ void layernorm_forward_packed_kernel(T* out, acc_t<T>* mean, acc_t<T>* rstd, const T* in,
                                                const T* w, const T* b, int64_t n, int64_t c,
                                                acc_t<T> eps) {
  using A = acc_t<T>;
  constexpr int kN = Pack<T>::kN;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= n) return;
  const T* x = in + r * c;
  A sum = 0;
  for (int64_t j = lane * kN; j < c; j += 32 * kN) {
    const Pack<T> xv = load_pack(x + j);
    for (int k = 0; k < kN; ++k) sum += static_cast<A>(xv.v[k]);
  }
  const A m = warp_sum(sum) / static_cast<A>(c);
  A sq = 0;
  for (int64_t j = lane * kN; j < c; j += 32 * kN) {
    const Pack<T> xv = load_pack(x + j);
    for (int k = 0; k < kN; ++k) {
      const A d = static_cast<A>(xv.v[k]) - m;
      sq += d * d;
    }
  }
  const A s = kernels::layernorm_rstd(warp_sum(sq), c, eps);
  T* y = out + r * c;
  for (int64_t j = lane * kN; j < c; j += 32 * kN) {
    const Pack<T> xv = load_pack(x + j), wv = load_pack(w + j), bv = load_pack(b + j);
    Pack<T> yv;
    for (int k = 0; k < kN; ++k)
      yv.v[k] = static_cast<T>(kernels::layernorm_out(
          static_cast<A>(xv.v[k]), m, s, static_cast<A>(wv.v[k]), static_cast<A>(bv.v[k])));
    store_pack(y + j, yv);
  }
  if (lane == 0) {
    mean[r] = m;
    rstd[r] = s;
  }
}

template <typename T>
__global__ void layernorm_backward_input_packed_kernel(T* din, const T* dout, const T* in,
                                                       const T* w, const acc_t<T>* mean,
                                                       const acc_t<T>* rstd, int64_t n, int64_t c) {
  using A = acc_t<T>;
  constexpr int kN = Pack<T>::kN;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= n) return;
  const T* x = in + r * c;
  const T* dy = dout + r * c;
  const A m = mean[r], s = rstd[r];
  A dmean = 0, dnorm_mean = 0;
  for (int64_t j = lane * kN; j < c; j += 32 * kN) {
    const Pack<T> xv = load_pack(x + j), wv = load_pack(w + j), dv = load_pack(dy + j);
    for (int k = 0; k < kN; ++k) {
      const A dnorm = kernels::layernorm_dnorm(static_cast<A>(wv.v[k]), static_cast<A>(dv.v[k]));
      dmean += dnorm;
      dnorm_mean += kernels::layernorm_dnorm_norm(dnorm, static_cast<A>(xv.v[k]), m, s);
    }
  }
  dmean = warp_sum(dmean) / static_cast<A>(c);
  dnorm_mean = warp_sum(dnorm_mean) / static_cast<A>(c);
  T* dx = din + r * c;
  for (int64_t j = lane * kN; j < c; j += 32 * kN) {
    const Pack<T> xv = load_pack(x + j), wv = load_pack(w + j), dv = load_pack(dy + j);
    Pack<T> gv = load_pack(dx + j);
    for (int k = 0; k < kN; ++k) {
      const A g = kernels::layernorm_dx(static_cast<A>(xv.v[k]), static_cast<A>(dv.v[k]),
                                        static_cast<A>(wv.v[k]), m, s, dmean, dnorm_mean);
      gv.v[k] = static_cast<T>(static_cast<A>(gv.v[k]) + g);
    }
    store_pack(dx + j, gv);
  }
}

template <typename T>
struct LayerNormParamTerms {
  const T* dout;
  const T* in;
  const acc_t<T>* mean;
  const acc_t<T>* rstd;
  int64_t c;
  __device__ void operator()(int64_t r, int64_t j, acc_t<T>* acc) const {
    using A = acc_t<T>;
    const A dy = static_cast<A>(dout[r * c + j]);
    acc[0] += kernels::layernorm_dw(dy, static_cast<A>(in[r * c + j]), mean[r], rstd[r]);
    acc[1] += dy;
  }
  // The same for the pack of columns from j0 (16-byte loads), the same terms per element.
  __device__ void pack(int64_t r, int64_t j0, acc_t<T> (*acc)[Pack<T>::kN]) const {
    using A = acc_t<T>;
    const Pack<T> d = load_pack(dout + r * c + j0), x = load_pack(in + r * c + j0);
    const A m = mean[r], rs = rstd[r];
    for (int k = 0; k < Pack<T>::kN; ++k) {
      const A dy = static_cast<A>(d.v[k]);
      acc[0][k] += kernels::layernorm_dw(dy, static_cast<A>(x.v[k]), m, rs);
      acc[1][k] += dy;
    }
  }
};

unsigned row_blocks(int64_t n) {
  return static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock);
}

void layernorm_forward_cuda(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& in,
                            const Tensor& weight, const Tensor& bias, double eps,
                            cudaStream_t stream) {
  const int64_t c = in.dim(-1), n = in.numel() / c;
  if (n == 0) return;
  dispatch_dtype(Device::kCUDA, in.dtype(), "layernorm_forward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    if (packed<T>(c, {out.data(), in.data(), weight.data(), bias.data()})) {
      layernorm_forward_packed_kernel<<<row_blocks(n), kCudaBlock, 0, stream>>>(
          out.data_as<T>(), mean.data_as<A>(), rstd.data_as<A>(), in.data_as<T>(),
          weight.data_as<T>(), bias.data_as<T>(), n, c, static_cast<A>(eps));
    } else {
      layernorm_forward_kernel<<<row_blocks(n), kCudaBlock, 0, stream>>>(
          out.data_as<T>(), mean.data_as<A>(), rstd.data_as<A>(), in.data_as<T>(),
          weight.data_as<T>(), bias.data_as<T>(), n, c, static_cast<A>(eps));
    }
  });
  CUDA_CHECK(cudaGetLastError());
}

void layernorm_backward_cuda(Tensor& din, Tensor& dweight, Tensor& dbias, const Tensor& dout,
                             const Tensor& in, const Tensor& weight, const Tensor& mean,
                             const Tensor& rstd, Workspace& ws, cudaStream_t stream) {
  const int64_t c = in.dim(-1), n = in.numel() / c;
  if (n == 0) return;
  dispatch_dtype(Device::kCUDA, in.dtype(), "layernorm_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const cuda::ColumnSumPlan plan = cuda::column_sum_plan<T>(n, c);
    A* partial = static_cast<A*>(ws.get(2 * plan.partial_elements() * sizeof(A)));
    if (packed<T>(c, {din.data(), dout.data(), in.data(), weight.data()})) {
      layernorm_backward_input_packed_kernel<<<row_blocks(n), kCudaBlock, 0, stream>>>(
          din.data_as<T>(), dout.data_as<T>(), in.data_as<T>(), weight.data_as<T>(),
          mean.data_as<A>(), rstd.data_as<A>(), n, c);
    } else {
      layernorm_backward_input_kernel<<<row_blocks(n), kCudaBlock, 0, stream>>>(
          din.data_as<T>(), dout.data_as<T>(), in.data_as<T>(), weight.data_as<T>(),
          mean.data_as<A>(), rstd.data_as<A>(), n, c);
    }
    CUDA_CHECK(cudaGetLastError());
    cuda::column_sums<A, Pack<T>::kN, 2>(
        plan, {{dweight.data_as<A>(), dbias.data_as<A>()}},
        LayerNormParamTerms<T>{dout.data_as<T>(), in.data_as<T>(), mean.data_as<A>(),
                               rstd.data_as<A>(), c},
        packed<T>(c, {dout.data(), in.data()}), partial, stream);
  });
}

}  // namespace

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CudaBackend::do_layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& in,
                                       const Tensor& weight, const Tensor& bias, double eps) {
  layernorm_forward_cuda(out, mean, rstd, in, weight, bias, eps, stream());
}

void CudaBackend::do_layernorm_backward(Tensor& din, Tensor& dweight, Tensor& dbias,
                                        const Tensor& dout, const Tensor& in, const Tensor& weight,
                                        const Tensor& mean, const Tensor& rstd) {
  layernorm_backward_cuda(din, dweight, dbias, dout, in, weight, mean, rstd, ws_, stream());
}

}  // namespace mtnlg
