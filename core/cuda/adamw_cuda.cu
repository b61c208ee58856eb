// AdamW on CUDA: one thread per element running core/kernels/adamw_math.h's adamw_element, the
// function the CPU kernel runs; the per-step constants are computed once on the host.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/cuda/cuda_backend_impl.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"
#include "core/id_checks.h"
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

// Up to kBatch tensors of one kind per launch (blockIdx.y picks the tensor, blockIdx.x strides
// its elements): the kernel's parameters, under the 4 KiB a launch takes on every GPU.
constexpr int kBatch = 32;

// P: the stored parameter (T itself for a plain step, bf16/fp16 for a rounded one); A: the type
// the step runs in (the master's, or T).
template <typename P, typename A>
struct AdamWBatch {
  int count = 0;
  P* param[kBatch];
  A* master[kBatch];  // rounded steps; plain ones step param in place
  const A* grad[kBatch];
  A* m[kBatch];
  A* v[kBatch];
  int64_t n[kBatch];
  kernels::AdamWCoeffs<A> k[kBatch];
  // A step's device words (Backend::adamw_update_many_from): the learning rate, the bias
  // corrections and the gradient scale read from them, nothing updated on kSkip; null: k as is.
  const double* words = nullptr;
};

// The batch's constants for tensor t, with a step's words where it has them; false: skip.
template <typename P, typename A>
__device__ bool batch_coeffs(const AdamWBatch<P, A>& b, int t, kernels::AdamWCoeffs<A>& k) {
  k = b.k[t];
  if (b.words == nullptr) return true;
  if (b.words[AdamWStepWords::kSkip] != 0.0) return false;
  k = kernels::adamw_coeffs_from(k, b.words);
  return true;
}
static_assert(sizeof(AdamWBatch<double, double>) <= 4096, "kernel parameters over 4 KiB");

template <typename T>
__global__ void adamw_many_kernel(AdamWBatch<T, T> b) {
  const int t = static_cast<int>(blockIdx.y);
  T* param = b.param[t];
  const T* grad = b.grad[t];
  T *m = b.m[t], *v = b.v[t];
  kernels::AdamWCoeffs<T> k;
  if (!batch_coeffs(b, t, k)) return;
  for (int64_t i = first_index(); i < b.n[t]; i += grid_stride())
    kernels::adamw_element(param[i], m[i], v[i], grad[i], k);
}

template <typename N>
__global__ void adamw_many_rounded_kernel(AdamWBatch<N, float> b) {
  const int t = static_cast<int>(blockIdx.y);
  N* param = b.param[t];
  float* master = b.master[t];
  const float* grad = b.grad[t];
  float *m = b.m[t], *v = b.v[t];
  kernels::AdamWCoeffs<float> k;
  if (!batch_coeffs(b, t, k)) return;
  for (int64_t i = first_index(); i < b.n[t]; i += grid_stride()) {
    float w = master[i];
    kernels::adamw_element(w, m[i], v[i], grad[i], k);
    master[i] = w;
    param[i] = static_cast<N>(w);
  }
}

// Enough blocks along x to stream the batch's largest tensor at full bandwidth; the rest stride.
unsigned batch_blocks(int64_t largest) {
  return std::min<unsigned>(cuda_grid(largest), 1024);
}

// The items with kind (P, A) in batches of kBatch, in order; `rounded` items use their master.
template <typename P, typename A, typename Launch>
void for_batches(const std::vector<AdamWItem>& items, bool rounded, DType param_dtype,
                 const double* words, Launch launch) {
  AdamWBatch<P, A> b;
  b.words = words;
  int64_t largest = 0;
  const auto flush = [&] {
    if (b.count > 0) launch(b, largest);
    b.count = 0;
    largest = 0;
  };
  for (const AdamWItem& it : items) {
    if ((it.master != nullptr) != rounded || it.param->dtype() != param_dtype) continue;
    const int64_t n = it.param->numel();
    if (n == 0) continue;
    MTNLG_CHECK_GE(it.args.step, 1);
    const int j = b.count++;
    b.param[j] = it.param->data_as<P>();
    b.master[j] = rounded ? it.master->data_as<A>() : nullptr;
    b.grad[j] = it.grad->data_as<A>();
    b.m[j] = it.m->data_as<A>();
    b.v[j] = it.v->data_as<A>();
    b.n[j] = n;
    b.k[j] = kernels::adamw_coeffs<A>(it.args);
    largest = std::max(largest, n);
    if (b.count == kBatch) flush();
  }
  flush();
}

// Backend::adamw_update_many: up to 32 tensors of one kind (f32, f64; bf16 or f16 with fp32
// masters) per launch; with `words` (a step's, on the device) adamw_update_many_from. Items
// checked by the caller.
void adamw_update_many_cuda(const std::vector<AdamWItem>& items, const double* words,
                            cudaStream_t stream) {
  const auto plain = [&](auto tag) {
    using T = decltype(tag);
    for_batches<T, T>(
        items, false, dtype_of<T>(), words, [&](const AdamWBatch<T, T>& b, int64_t largest) {
          adamw_many_kernel<<<dim3(batch_blocks(largest), b.count), kCudaBlock, 0, stream>>>(b);
          CUDA_CHECK(cudaGetLastError());
        });
  };
  const auto rounded = [&](auto tag) {
    using N = decltype(tag);
    for_batches<N, float>(items, true, dtype_of<N>(), words,
                          [&](const AdamWBatch<N, float>& b, int64_t largest) {
                            adamw_many_rounded_kernel<<<dim3(batch_blocks(largest), b.count),
                                                        kCudaBlock, 0, stream>>>(b);
                            CUDA_CHECK(cudaGetLastError());
                          });
  };
  plain(float{});
  plain(double{});
  rounded(Bf16{});
  rounded(F16{});
}

// The f32 master steps as in adamw_update_cuda and param (bf16 or f16) = it, rounded.
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
  dispatch_dtype<DTypeSet::kWide>(Device::kCUDA, param.dtype(), "adamw_update", [&](auto tag) {
    using T = decltype(tag);
    const kernels::AdamWCoeffs<T> k = kernels::adamw_coeffs<T>(args);
    adamw_kernel<<<cuda_grid(n), kCudaBlock, 0, stream>>>(param.data_as<T>(), grad.data_as<T>(),
                                                          m.data_as<T>(), v.data_as<T>(), k, n);
  });
  CUDA_CHECK(cudaGetLastError());
}

// Backend::grad_clip_words: one thread runs the host's arithmetic (kernels::grad_clip_words) on
// the per-tensor sums, in the host's order; a few hundred additions, once a step. A bad token or
// target id found by a check not yet read (its word lowered from kClear) skips the update too:
// the host's path raises it at the loss read before any update, a captured step at its words'
// read after the update, which must then not have run (the CPU raised it at the operation).
__global__ void grad_clip_words_kernel(double* words, const double* sums, int64_t n, int64_t first,
                                       const double* loss, double max_norm,
                                       const uint64_t* id_words, int id_count) {
  kernels::grad_clip_words(words, sums, n, first, *loss, max_norm);
  for (int i = 0; i < id_count; ++i)
    if (id_words[i] != DeferredIdChecks::kClear) words[AdamWStepWords::kSkip] = 1.0;
}

}  // namespace

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CudaBackend::do_adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                                  const AdamWArgs& args) {
  adamw_update_cuda(param, grad, m, v, args, stream());
}

void CudaBackend::do_adamw_update_rounded(Tensor& param, Tensor& master, const Tensor& grad,
                                          Tensor& m, Tensor& v, const AdamWArgs& args) {
  check_rounded_dtypes(param, master, "adamw_update_rounded");
  adamw_update_rounded_cuda(param, master, grad, m, v, args, stream());
}

void CudaBackend::do_adamw_update_many(const std::vector<AdamWItem>& items) {
  check_many_dtypes(items, "adamw_update_many");
  adamw_update_many_cuda(items, nullptr, stream());
}

void CudaBackend::do_adamw_update_many_from(const std::vector<AdamWItem>& items,
                                            const Tensor& words) {
  check_many_dtypes(items, "adamw_update_many_from");
  adamw_update_many_cuda(items, words.data_as<double>(), stream());
}

void CudaBackend::do_grad_clip_words(Tensor& words, const Tensor& sums, int64_t first,
                                     const Tensor& loss, double max_norm) {
  grad_clip_words_kernel<<<1, 1, 0, stream()>>>(words.data_as<double>(), sums.data_as<double>(),
                                                sums.numel(), first, loss.data_as<double>(),
                                                max_norm, id_words(), kIdCheckWords);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace mtnlg
