// Softmax cross entropy on CUDA over the first `vocab` of vp columns: a block per row, the row's
// max and sum of exponentials in acc_t<T> (fp32 for bf16/fp16 logits), as the CPU kernel does.
// Forward keeps per-row losses in double and adds them in row order on the device, so the loss
// is the same on every run; backward forms softmax - onehot in acc_t<T> and rounds once.
#include <cmath>
#include <cstdint>

#include "core/cuda/cuda_backend_impl.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"
#include "core/kernels/vocab_shard_math.h"

namespace mtnlg {

namespace {

// Block-wide reduction (sum, or max when kMax) of v, returned to every thread. Fixed order.
template <bool kMax, typename A>
__device__ A block_reduce(A v) {
  __shared__ A part[kCudaBlock / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  A r = part[0];
  for (int w = 1; w < kCudaBlock / 32; ++w) r = kMax ? (part[w] > r ? part[w] : r) : r + part[w];
  __syncthreads();  // part is reused by the next call
  return r;
}

// f(j, x[j]) for this thread's share of a row's elements [0, n): whole 16-byte packs when the
// row starts on a 16-byte boundary (one load a lane where 2-byte bf16 elements took eight), then
// the rest one at a time. Each element reaches f exactly once, from one thread.
template <typename T, typename F>
__device__ __forceinline__ void for_row(const T* x, int64_t n, F&& f) {
  constexpr int kN = Pack<T>::kN;
  const int64_t whole = aligned16(x) ? n / kN : 0;
  for (int64_t q = threadIdx.x; q < whole; q += kCudaBlock) {
    const Pack<T> p = load_pack(x + q * kN);
#pragma unroll
    for (int k = 0; k < kN; ++k) f(q * kN + k, p.v[k]);
  }
  for (int64_t j = whole * kN + threadIdx.x; j < n; j += kCudaBlock) f(j, x[j]);
}

// d[j] = f(j, x[j]) for this thread's share of [0, n): whole packs (a pack read, then written, by
// one thread: d may be x) when both rows start on a 16-byte boundary, then one at a time.
template <typename T, typename F>
__device__ __forceinline__ void map_row(T* d, const T* x, int64_t n, F&& f) {
  constexpr int kN = Pack<T>::kN;
  const int64_t whole = aligned16(x) && aligned16(d) ? n / kN : 0;
  for (int64_t q = threadIdx.x; q < whole; q += kCudaBlock) {
    const Pack<T> p = load_pack(x + q * kN);
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < kN; ++k) out.v[k] = f(q * kN + k, p.v[k]);
    store_pack(d + q * kN, out);
  }
  for (int64_t j = whole * kN + threadIdx.x; j < n; j += kCudaBlock) d[j] = f(j, x[j]);
}

// (max, sum of exp(x - max)) over x[0..vocab)
template <typename T>
__device__ void row_logsumexp(const T* x, int64_t vocab, acc_t<T>& mx, acc_t<T>& sum) {
  using A = acc_t<T>;
  A m = static_cast<A>(x[0]);
  for_row(x, vocab, [&](int64_t, T e) {
    const A v = static_cast<A>(e);
    m = v > m ? v : m;
  });
  mx = block_reduce<true>(m);
  A s = 0;  // each thread's elements in order, then the threads in order: fixed
  for_row(x, vocab, [&](int64_t, T e) { s += exp(static_cast<A>(e) - mx); });
  sum = block_reduce<false>(s);
}

template <typename T>
__global__ void cross_entropy_forward_kernel(double* row_loss, const T* logits,
                                             const int32_t* targets, int64_t vp, int64_t vocab) {
  using A = acc_t<T>;
  const int64_t r = blockIdx.x;
  const T* x = logits + r * vp;
  A mx, sum;
  row_logsumexp(x, vocab, mx, sum);
  // A bad target (its check raises at the host's next synchronization) reads no logit: NaN.
  const int32_t t = targets[r];
  if (threadIdx.x == 0) {
    row_loss[r] = t >= 0 && t < vocab ? static_cast<double>(log(sum) + mx - static_cast<A>(x[t]))
                                      : static_cast<double>(NAN);
  }
}

// Row r is read completely (max, sum) before any of it is written, so dlogits may be logits.
template <typename T>
__global__ void cross_entropy_backward_kernel(T* dlogits, const T* logits, const int32_t* targets,
                                              int64_t vp, int64_t vocab, acc_t<T> grad_scale) {
  using A = acc_t<T>;
  const int64_t r = blockIdx.x;
  const T* x = logits + r * vp;
  A mx, sum;
  row_logsumexp(x, vocab, mx, sum);
  const A inv = grad_scale / sum;
  const int32_t target = targets[r];
  T* dx = dlogits + r * vp;
  const auto grad = [&](int64_t j, T e) {
    A g = 0;
    if (j < vocab) {
      g = exp(static_cast<A>(e) - mx) * inv;
      if (j == target) g -= grad_scale;
    }
    return static_cast<T>(g);
  };
  map_row(dx, x, vp, grad);
}

// The vocab-parallel steps (a block per row), in double as on the CPU: a shard's statistics meet
// the other ranks' in an all-reduce.
template <typename T>
__global__ void cross_entropy_shard_max_kernel(double* row_max, const T* logits, int64_t cols,
                                               int64_t real) {
  const T* x = logits + static_cast<int64_t>(blockIdx.x) * cols;
  double m = -INFINITY;
  for_row(x, real, [&](int64_t, T e) {
    const double v = static_cast<double>(static_cast<acc_t<T>>(e));
    m = v > m ? v : m;
  });
  m = block_reduce<true>(m);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

template <typename T>
__global__ void cross_entropy_shard_stats_kernel(double* stats, const T* logits,
                                                 const int32_t* targets, const double* row_max,
                                                 int64_t n, int64_t cols, int64_t start,
                                                 int64_t real) {
  const int64_t r = blockIdx.x;
  const T* x = logits + r * cols;
  const double mx = row_max[r];
  double sum = 0.0;  // each thread's elements in order, then the threads in order: fixed
  for_row(x, real,
          [&](int64_t, T e) { sum += exp(static_cast<double>(static_cast<acc_t<T>>(e)) - mx); });
  sum = block_reduce<false>(sum);
  if (threadIdx.x == 0) {
    stats[r] = sum;
    const int64_t local = kernels::shard_index(targets[r], start, cols);
    stats[n + r] = local >= 0 ? static_cast<double>(static_cast<acc_t<T>>(x[local])) : 0.0;
  }
}

// Each element is read before it is written, by the same thread, so dlogits may be logits.
template <typename T>
__global__ void cross_entropy_shard_backward_kernel(T* dlogits, const T* logits,
                                                    const int32_t* targets, const double* row_max,
                                                    const double* row_sum, int64_t cols,
                                                    int64_t start, int64_t real,
                                                    double grad_scale) {
  const int64_t r = blockIdx.x;
  const T* x = logits + r * cols;
  T* d = dlogits + r * cols;
  const int64_t target = kernels::shard_index(targets[r], start, cols);
  const double mx = row_max[r], sum = row_sum[r];
  const auto grad = [&](int64_t j, T e) {
    const double g = j < real
                         ? kernels::vocab_ce_grad(static_cast<double>(static_cast<acc_t<T>>(e)), mx,
                                                  sum, j == target, grad_scale)
                         : 0.0;
    return static_cast<T>(static_cast<acc_t<T>>(g));
  };
  map_row(d, x, cols, grad);
}

// Backend::cross_entropy_shard_*; `real` = kernels::shard_real_columns of the shard.
void cross_entropy_shard_max_cuda(Tensor& row_max, const Tensor& logits, int64_t real,
                                  cudaStream_t stream) {
  const int64_t cols = logits.dim(-1), n = logits.numel() / cols;
  if (n == 0) return;
  dispatch_dtype(Device::kCUDA, logits.dtype(), "cross_entropy_shard_max", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_shard_max_kernel<<<static_cast<unsigned>(n), kCudaBlock, 0, stream>>>(
        row_max.data_as<double>(), logits.data_as<T>(), cols, real);
  });
  CUDA_CHECK(cudaGetLastError());
}

void cross_entropy_shard_stats_cuda(Tensor& stats, const Tensor& logits, const Tensor& targets,
                                    const Tensor& row_max, int64_t vocab_start, int64_t real,
                                    cudaStream_t stream) {
  const int64_t cols = logits.dim(-1), n = logits.numel() / cols;
  if (n == 0) return;
  dispatch_dtype(Device::kCUDA, logits.dtype(), "cross_entropy_shard_stats", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_shard_stats_kernel<<<static_cast<unsigned>(n), kCudaBlock, 0, stream>>>(
        stats.data_as<double>(), logits.data_as<T>(), targets.data_as<int32_t>(),
        row_max.data_as<double>(), n, cols, vocab_start, real);
  });
  CUDA_CHECK(cudaGetLastError());
}

void cross_entropy_shard_backward_cuda(Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                                       const Tensor& row_max, const Tensor& row_sum,
                                       int64_t vocab_start, int64_t real, double grad_scale,
                                       cudaStream_t stream) {
  const int64_t cols = logits.dim(-1), n = logits.numel() / cols;
  if (n == 0) return;
  dispatch_dtype(Device::kCUDA, logits.dtype(), "cross_entropy_shard_backward", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_shard_backward_kernel<<<static_cast<unsigned>(n), kCudaBlock, 0, stream>>>(
        dlogits.data_as<T>(), logits.data_as<T>(), targets.data_as<int32_t>(),
        row_max.data_as<double>(), row_sum.data_as<double>(), cols, vocab_start, real, grad_scale);
  });
  CUDA_CHECK(cudaGetLastError());
}

// The row losses in double, in the workspace (n of them).
double* cross_entropy_row_losses_cuda(const Tensor& logits, const Tensor& targets, int64_t vocab,
                                      Workspace& ws, cudaStream_t stream) {
  const int64_t vp = logits.dim(-1), n = logits.numel() / vp;
  double* row_loss = static_cast<double*>(ws.get(static_cast<size_t>(n) * sizeof(double)));
  dispatch_dtype(Device::kCUDA, logits.dtype(), "cross_entropy_forward", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_forward_kernel<<<static_cast<unsigned>(n), kCudaBlock, 0, stream>>>(
        row_loss, logits.data_as<T>(), targets.data_as<int32_t>(), vp, vocab);
  });
  CUDA_CHECK(cudaGetLastError());
  return row_loss;
}

// Row losses in double, summed in a fixed order on the device; synchronizes to return the sum.
double cross_entropy_forward_cuda(const Tensor& logits, const Tensor& targets, int64_t vocab,
                                  Workspace& ws, double* result, cudaStream_t stream) {
  const int64_t n = logits.numel() / logits.dim(-1);
  if (n == 0) return 0.0;
  return sum_doubles_cuda(cross_entropy_row_losses_cuda(logits, targets, vocab, ws, stream), n,
                          result, stream);
}

void cross_entropy_backward_cuda(Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                                 int64_t vocab, double grad_scale, cudaStream_t stream) {
  const int64_t vp = logits.dim(-1), n = logits.numel() / vp;
  if (n == 0) return;
  dispatch_dtype(Device::kCUDA, logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_backward_kernel<<<static_cast<unsigned>(n), kCudaBlock, 0, stream>>>(
        dlogits.data_as<T>(), logits.data_as<T>(), targets.data_as<int32_t>(), vp, vocab,
        static_cast<acc_t<T>>(grad_scale));
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
double CudaBackend::do_cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                             int64_t vocab) {
  const char* op = "cross_entropy_forward";
  check_ids(targets, vocab, op, "target id", kVocabFix);  // the rest: checked by the front
  return with_id_checks([&] {
    return cross_entropy_forward_cuda(logits, targets, vocab, ws_,
                                      sum_scratch() + (kSumSquaresScratch - 1), stream());
  });
}

// The same sum as do_cross_entropy_forward's, added into total on the device: no wait.
void CudaBackend::do_cross_entropy_forward_add(Tensor& total, const Tensor& logits,
                                               const Tensor& targets, int64_t vocab) {
  const char* op = "cross_entropy_forward_add";
  check_ids(targets, vocab, op, "target id", kVocabFix);  // the rest: checked by the front
  const int64_t n = logits.numel() / logits.dim(-1);
  if (n == 0) return;
  add_sum_of_doubles_cuda(cross_entropy_row_losses_cuda(logits, targets, vocab, ws_, stream()), n,
                          total.data_as<double>(), stream());
}

void CudaBackend::do_cross_entropy_backward(Tensor& dlogits, const Tensor& logits,
                                            const Tensor& targets, int64_t vocab,
                                            double grad_scale) {
  const char* op = "cross_entropy_backward";
  check_ids(targets, vocab, op, "target id", kVocabFix);  // the rest: checked by the front
  cross_entropy_backward_cuda(dlogits, logits, targets, vocab, grad_scale, stream());
}

void CudaBackend::do_cross_entropy_shard_max(Tensor& row_max, const Tensor& logits,
                                             int64_t vocab_start, int64_t vocab) {
  const char* op = "cross_entropy_shard_max";
  const int64_t real = ce_shard_rows_and_real(op, logits, vocab_start, vocab).second;
  cross_entropy_shard_max_cuda(row_max, logits, real, stream());
}

void CudaBackend::do_cross_entropy_shard_stats(Tensor& stats, const Tensor& logits,
                                               const Tensor& targets, const Tensor& row_max,
                                               int64_t vocab_start, int64_t vocab) {
  const char* op = "cross_entropy_shard_stats";
  const int64_t real = ce_shard_rows_and_real(op, logits, vocab_start, vocab).second;
  check_ids(targets, vocab, op, "target id", kVocabFix);
  cross_entropy_shard_stats_cuda(stats, logits, targets, row_max, vocab_start, real, stream());
}

void CudaBackend::do_cross_entropy_shard_backward(Tensor& dlogits, const Tensor& logits,
                                                  const Tensor& targets, const Tensor& row_max,
                                                  const Tensor& row_sum, int64_t vocab_start,
                                                  int64_t vocab, double grad_scale) {
  const char* op = "cross_entropy_shard_backward";
  const int64_t real = ce_shard_rows_and_real(op, logits, vocab_start, vocab).second;
  cross_entropy_shard_backward_cuda(dlogits, logits, targets, row_max, row_sum, vocab_start, real,
                                    grad_scale, stream());
}

}  // namespace mtnlg
