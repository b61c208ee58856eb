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

}  // namespace

void adamw_update_cuda(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                       const AdamWArgs& args, cudaStream_t stream) {
  MTNLG_CHECK_GE(args.step, 1);
  const int64_t n = param.numel();
  if (n == 0) return;
  dispatch_floating(param.dtype(), "adamw_update", [&](auto tag) {
    using T = decltype(tag);
    const double step = static_cast<double>(args.step);
    const kernels::AdamWCoeffs<T> k{
        static_cast<T>(args.lr),
        static_cast<T>(args.beta1),
        static_cast<T>(args.beta2),
        static_cast<T>(args.eps),
        static_cast<T>(args.weight_decay),
        static_cast<T>(args.grad_scale),
        static_cast<T>(1.0 - std::pow(args.beta1, step)),
        static_cast<T>(1.0 - std::pow(args.beta2, step)),
    };
    adamw_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(param.data_as<T>(), grad.data_as<T>(),
                                                          m.data_as<T>(), v.data_as<T>(), k, n);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mtnlg
