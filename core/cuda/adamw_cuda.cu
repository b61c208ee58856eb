// AdamW on CUDA: one thread per element running core/kernels/adamw_math.h's adamw_element, the
// function the CPU kernel runs; the per-step constants are computed once on the host.
#include <cmath>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"
#include "core/kernels/adamw_math.h"

namespace mtnlg {

namespace {

template <typename T>
__global__ void adamw_kernel(T* param, const T* grad, T* m, T* v, kernels::AdamWCoeffs<T> k,
                             int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    kernels::adamw_element(param[i], m[i], v[i], grad[i], k);
  }
}

// adamw_kernel on fp32 masters, each then rounded into the narrow weight.
template <typename N>
__global__ void adamw_rounded_kernel(N* param, float* master, const float* grad, float* m, float* v,
                                     kernels::AdamWCoeffs<float> k, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    float w = master[i];
    kernels::adamw_element(w, m[i], v[i], grad[i], k);
    master[i] = w;
    param[i] = static_cast<N>(w);
  }
}

}  // namespace

void adamw_update_rounded_cuda(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                               Tensor& v, const AdamWArgs& args, cudaStream_t stream) {
  MTNLG_CHECK_GE(args.step, 1);
  const int64_t n = master.numel();
  if (n == 0) return;
  const kernels::AdamWCoeffs<float> k = kernels::adamw_coeffs<float>(args);
  if (param.dtype() == DType::kBF16) {
    adamw_rounded_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(
        param.data_as<Bf16>(), master.data_as<float>(), grad.data_as<float>(), m.data_as<float>(),
        v.data_as<float>(), k, n);
  } else {
    adamw_rounded_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(
        param.data_as<F16>(), master.data_as<float>(), grad.data_as<float>(), m.data_as<float>(),
        v.data_as<float>(), k, n);
  }
  CUDA_CHECK(cudaGetLastError());
}

void adamw_update_cuda(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                       const AdamWArgs& args, cudaStream_t stream) {
  MTNLG_CHECK_GE(args.step, 1);
  const int64_t n = param.numel();
  if (n == 0) return;
  dispatch_floating<true>(param.dtype(), "adamw_update", [&](auto tag) {
    using T = decltype(tag);
    const kernels::AdamWCoeffs<T> k = kernels::adamw_coeffs<T>(args);
    adamw_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(param.data_as<T>(), grad.data_as<T>(),
                                                          m.data_as<T>(), v.data_as<T>(), k, n);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mtnlg
