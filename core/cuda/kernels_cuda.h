// The CUDA kernel launchers one .cu file calls in another (core/cuda/<family>_cuda.cu), one
// section per defining file; a family's other launchers are private to its file, behind its
// CudaBackend::do_ members (docs/backend.md). Each launcher has the Backend method's name plus
// `_cuda`, its arguments, and the stream it enqueues on; semantics (accumulate vs overwrite,
// aliasing) are as in core/backend.h, preconditions checked by Backend's front before the call.
// Launchers are asynchronous unless they return a host value. Thread safety: as the stream's.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "core/backend.h"
#include "core/caching_allocator.h"
#include "core/cuda/cublas_library.h"
#include "core/cuda/device_overheads.h"
#include "core/kernels/dropout_math.h"
#include "core/kernels/flash_common.h"
#include "core/tensor.h"

namespace mtnlg {

// Device scratch that grows to the largest size asked for and is reused: the temporaries of
// one launcher (attention's score matrices, column-sum partials, sort buffers). Its blocks come
// from the backend's caching allocator: growing returns the old block to the cache, which hands
// it out again only in stream order, so growing never calls cudaFree (which would wait for the
// whole device, communicators' collectives in flight included). get() may replace the block, so
// a launcher calls it once, for everything it needs, before enqueueing work. Not counted in
// Backend::live_bytes() (as the CPU's per-thread staging is not), but in the allocator's
// reserved bytes. One stream, one thread.
class Workspace {
 public:
  // moves: bumped each time the block moves (the backend's recording epoch: a CUDA graph holds
  // the old address); capturing: growth is refused while true (a recording cannot allocate).
  Workspace(CachingAllocator& cache, uint64_t& moves, const bool& capturing)
      : cache_(cache), moves_(moves), capturing_(capturing) {}
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  ~Workspace();
  void* get(size_t bytes);
  size_t bytes() const { return bytes_; }

 private:
  CachingAllocator& cache_;  // the backend's; outlives this
  uint64_t& moves_;          // the backend's, as cache_
  const bool& capturing_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A fixed block of exactly `bytes` from the backend's caching allocator, held for the backend's
// life: scratch of its own that, like Workspace's, is not a tensor (not in live_bytes, which the
// planner predicts to the byte) but is in the allocator's reserved bytes.
class DeviceBlock {
 public:
  DeviceBlock(CachingAllocator& cache, size_t bytes);
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  ~DeviceBlock();
  void* data() const { return ptr_; }

 private:
  CachingAllocator& cache_;  // the backend's; outlives this
  size_t bytes_;
  void* ptr_;
};

// ---- elementwise_cuda.cu ----
// t[i] = value (f32, f64, bf16, f16, i32)
void fill_cuda(Tensor& t, double value, cudaStream_t stream);
// dst[i] = src[i] converted between f32, f64, bf16 and f16 (rounded to nearest even); both on
// the device, same numel.
void convert_cuda(Tensor& dst, const Tensor& src, cudaStream_t stream);
void add_cuda(Tensor& out, const Tensor& a, const Tensor& b, cudaStream_t stream);
void axpy_cuda(Tensor& y, const Tensor& x, double alpha, cudaStream_t stream);
void scale_cuda(Tensor& x, double alpha, cudaStream_t stream);
// y[n, c] += bias[c]
void add_bias_cuda(Tensor& y, const Tensor& bias, cudaStream_t stream);

// dst[0..count) = the first `count` words, enqueued on `stream` with the words as the kernel's
// arguments: the host returns at once and nothing is read from host memory later (a
// cudaMemcpyAsync from pageable host memory may wait for the stream first). The random streams'
// base word (Backend::set_rng_stream_base).
void store_words_cuda(int64_t* dst, const std::array<int64_t, 4>& words, cudaStream_t stream,
                      int count = 4);
// cuDNN attention's Philox seed [0] and offset [2] for `rng` into words [0..4): cuDNN takes a
// seed and an offset, so the stream's seed and sub-stream are mixed into the seed (splitmix64's
// finalizer), on the device, where the stream's base word is (RngStream::stream_base).
void store_cudnn_seed_offset_cuda(int64_t* words, RngStream rng, cudaStream_t stream);

// ---- reduce_cuda.cu ----
// sum of x[i]^2 accumulated in double; `scratch` holds kSumSquaresScratch doubles on the
// device (core/cuda/device_overheads.h). Synchronizes the stream to return the value.
double sum_squares_cuda(const Tensor& x, double* scratch, cudaStream_t stream);
// sum_squares_cuda of each tensor (the same values) into results (xs.size() doubles on the
// device), its first pass in `ws`; nothing waits.
void sum_squares_into_cuda(const std::vector<Tensor>& xs, double* results, Workspace& ws,
                           cudaStream_t stream);
// sum_squares_cuda of each tensor (the same values), with one synchronization.
std::vector<double> sum_squares_many_cuda(const std::vector<Tensor>& xs, Workspace& ws,
                                          cudaStream_t stream);
// Sum of values[0..count) on the device into *result, in a fixed order; synchronizes and
// returns it.
double sum_doubles_cuda(const double* values, int64_t count, double* result, cudaStream_t stream);
// *total += the same sum (the same bits as adding sum_doubles_cuda's value), on the device:
// waits for nothing.
void add_sum_of_doubles_cuda(const double* values, int64_t count, double* total,
                             cudaStream_t stream);
// dbias[c] += sum_n dy[n, c] (dbias in acc_t of dy's dtype)
void bias_backward_cuda(Tensor& dbias, const Tensor& dy, Workspace& ws, cudaStream_t stream);

// ---- gemm_cuda.cu ----
// c[m, n] = alpha * op(a) @ op(b) + beta * c (row-major), via cuBLAS's GemmEx on the handle's
// stream. a and b share a dtype; c has it too, or is f32 for bf16/f16 operands (fp32 accumulation
// throughout; no TF32).
void gemm_cuda(const Blas& blas, Tensor& c, const Tensor& a, bool trans_a, const Tensor& b,
               bool trans_b, double alpha, double beta);
// `batch` row-major products C_i = alpha op(A_i) op(B_i) + beta C_i on raw device pointers, A_i
// at a + i * stride_a elements (likewise b, c); ld* are row-major row strides in elements.
void gemm_strided_batched_cuda(const Blas& blas, DType ab_type, DType c_type, bool trans_a,
                               bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                               const void* a, int64_t lda, int64_t stride_a, const void* b,
                               int64_t ldb, int64_t stride_b, double beta, void* c, int64_t ldc,
                               int64_t stride_c, int64_t batch);

// ---- attention_cuda.cu ----
// Scores and products are strided-batched cuBLAS GEMMs over the heads of one sequence, with the
// causal softmax (and dropout) in a kernel between them; stats is Backend's saved log-sum-exp per
// row, from which backward recomputes the softmax.
void attention_forward_cuda(const Blas& blas, Tensor& out, Tensor& stats, const Tensor& qkv,
                            int64_t heads, double dropout_p, RngStream rng, Workspace& ws);
void attention_backward_cuda(const Blas& blas, Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                             const Tensor& stats, int64_t heads, double dropout_p, RngStream rng,
                             Workspace& ws);

// ---- the FA2-style kernels' shared pieces (flash2_attention_cuda.cu) ----
// What decides whether the FA2-style kernels can run on this device.
struct FlashDevice {
  int compute_major = 0;      // mma.sync bf16 needs 8.0
  size_t max_smem_optin = 0;  // cudaDevAttrMaxSharedMemoryPerBlockOptin
};
// The FA2-style kernels' shape of a call, qkv [b, s, heads * 3 * hd], and its scales:
// 1/sqrt(hd) for the scores and 1/(1 - p) for kept elements, through float as attention_cuda.cu's.
inline kernels::flash::Dims flash_dims(const Tensor& qkv, int64_t heads) {
  return {qkv.dim(0), qkv.dim(1), heads, qkv.dim(2) / (3 * heads)};
}
inline float flash_score_scale(int64_t hd) {
  return 1.0f / std::sqrt(static_cast<float>(hd));
}
inline float flash_drop_scale(double p) {
  return p > 0.0 ? kernels::dropout_scale(static_cast<float>(p)) : 1.0f;
}
// A forward or backward call's arguments for the FA2-style programs (T bf16 or fp16).
template <typename T>
kernels::flash::ForwardArgs<T> flash_forward_args(Tensor& out, Tensor& stats, const Tensor& qkv,
                                                  int64_t heads, double p, RngStream rng) {
  const kernels::flash::Dims d = flash_dims(qkv, heads);
  return {qkv.data_as<T>(),        out.data_as<T>(),      stats.data_as<float>(), d,
          flash_score_scale(d.hd), static_cast<float>(p), flash_drop_scale(p),    rng};
}
template <typename T>
kernels::flash::BackwardArgs<T> flash_backward_args(Tensor& dqkv, const Tensor& dout,
                                                    const Tensor& qkv, const Tensor& out,
                                                    const Tensor& stats, int64_t heads, double p,
                                                    RngStream rng, float* delta,
                                                    uint32_t* keep = nullptr) {
  const kernels::flash::Dims d = flash_dims(qkv, heads);
  return {qkv.data_as<T>(),
          out.data_as<T>(),
          dout.data_as<T>(),
          stats.data_as<float>(),
          delta,
          dqkv.data_as<T>(),
          d,
          flash_score_scale(d.hd),
          static_cast<float>(p),
          flash_drop_scale(p),
          rng,
          keep};
}
// ---- flash2_attention_cuda.cu ----
// Attention FA2-style (core/kernels/flash2_forward.h, flash2_backward.h: scores, probabilities
// and accumulators in registers), Backend's attention contract (core/kernels/flash_common.h):
// the same out and stats as the blocked kernels, so any backward can follow either forward;
// backward deterministic, its scratch from ws (flash2_backward.h's backward_scratch_bytes: delta,
// the keep bits, dS^T when stored). Applies to bf16/fp16 at head sizes 64 and 128 on compute
// capability 8.0 or later, every operand 16-byte aligned.
bool flash2_attention_applies(const FlashDevice& dev, const Tensor& qkv, int64_t heads,
                              std::initializer_list<const Tensor*> operands);
// wide_rows: forward blocks of 128 query rows, two 16-row m tiles a warp (MTNLG_CUDA_FLASH2_ROWS=
// 128), else 64, one a warp; the same bits either way.
void flash2_forward_cuda(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads,
                         double dropout_p, RngStream rng, bool wide_rows, cudaStream_t stream);
// stored_ds: dq from dS^T stored by the dk/dv pass (prep, dk/dv, dq: five products a tile), else
// from its own recomputed scores (dq, dk/dv: seven); flash2_backward.h says more.
void flash2_backward_cuda(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                          const Tensor& stats, int64_t heads, double dropout_p, RngStream rng,
                          bool stored_ds, Workspace& ws, cudaStream_t stream);

// *word (device; DeferredIdChecks::kClear before) becomes DeferredIdChecks::pack(position, id)
// of the first position whose id is outside [0, limit), or stays (core/id_checks.h). Waits for
// nothing.
void check_ids_cuda(const Tensor& ids, int64_t limit, uint64_t* word, cudaStream_t stream);

// out = the FP8 bytes (format f) of the 2-D in (bf16 or f32 values already on the FP8 grid:
// exact), [rows, cols] as stored or transposed to [cols, rows] (core/cuda/fp8_cuda.cu).
void fp8_pack_cuda(uint8_t* out, const Tensor& in, bool transpose, Fp8Format f,
                   cudaStream_t stream);

}  // namespace mtnlg
