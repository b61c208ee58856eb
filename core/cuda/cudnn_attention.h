// Causal self-attention through cuDNN's fused attention (its graph API; the kernels Transformer
// Engine runs on Hopper): MTNLG_CUDA_ATTENTION=cudnn. The graphs are the ones cuDNN's frontend
// builds for scaled dot-product attention (cudnn-frontend's SDPA nodes, written here against the
// backend API: cuDNN 9 ships no frontend headers): forward Q K^T, scale, causal mask, softmax
// with its log-sum-exp statistics, dropout, P V; backward the recomputed P, dV = P^T dO,
// dP = dO V^T, dS = P (dP - rowsum(dO O)), dQ = dS K, dK = dS^T Q, with the dropout mask and its
// scale on P and dP. cuDNN finds the fused engine that runs the whole graph; where none does it
// says so and the call fails naming the shape.
//
// The Backend contract holds (backend.h: out, and stats as each row's log-sum-exp of the
// scaled causal scores, so a cuDNN forward pairs with any backward without dropout), except the
// dropout mask: cuDNN draws its own (Philox from a seed and offset derived from the RngStream), not
// the CPU's element index, so with dropout a cuDNN forward pairs only with a cuDNN backward
// (attention_choice makes `cudnn` both passes) and tests check it by its statistics.
//
// Backward is cuDNN's deterministic variant (dQ by a GEMM over dS held in the workspace rather
// than accumulated by atomics) unless MTNLG_CUDA_CUDNN_DQ=accumulate: reruns stay bit-identical.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "core/rng.h"
#include "core/tensor.h"

namespace mtnlg {

class CudnnLibrary;
class Workspace;

class CudnnAttention {
 public:
  // Opens cuDNN and makes a handle on `stream`; throws Code::kUnsupported where cuDNN is missing.
  explicit CudnnAttention(cudaStream_t stream, bool deterministic = true);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // As Backend::attention_forward / attention_backward (qkv [b, s, heads * 3 * hd], per head q,
  // k, v; out [b, s, heads * hd]; stats [b, heads, s] f32), the scratch from `ws`.
  void forward(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads, double dropout_p,
               RngStream rng, Workspace& ws);
  void backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                const Tensor& stats, int64_t heads, double dropout_p, RngStream rng,
                Workspace& ws);

  // "cuDNN 9.19.0, deterministic backward": for the log.
  std::string describe() const;

  struct Plan;  // one shape's finalized execution plan and its tensors' ids

 private:
  using Key = std::tuple<bool, int64_t, int64_t, int64_t, int64_t, int, double>;
  Plan& plan(bool backward, int64_t b, int64_t s, int64_t heads, int64_t hd, DType dtype,
             double dropout_p);

  std::unique_ptr<CudnnLibrary> lib_;
  void* handle_ = nullptr;  // cudnnHandle_t
  cudaStream_t stream_;
  bool deterministic_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  void* seed_offset_ = nullptr;  // device int64[4]: the dropout's Philox seed [0] and offset [2]
};

}  // namespace mtnlg
