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
  // strict (MTNLG_CUDA_ATTENTION=cudnn named): takes() throws where cuDNN refuses a shape.
  explicit CudnnAttention(cudaStream_t stream, bool deterministic = true, bool strict = true);
  // As the constructor, but where cuDNN cannot be opened (Code::kUnsupported) and !strict: logs
  // why, once, and returns null (the default choice then runs other kernels).
  static std::unique_ptr<CudnnAttention> open(cudaStream_t stream, bool deterministic, bool strict);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // As Backend::attention_forward / attention_backward (qkv [b, s, heads * 3 * hd], per head q,
  // k, v; out [b, s, heads * hd]; stats [b, heads, s] f32), the scratch from `ws`.
  void forward(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads, double dropout_p,
               RngStream rng, Workspace& ws);
  void backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                const Tensor& stats, int64_t heads, double dropout_p, RngStream rng, Workspace& ws);

  // Whether cuDNN runs both passes of calls of this shape: builds the forward's and the
  // backward's plans on first sight, so that a shape it refuses is known before a forward runs
  // (its backward must be its own: the masks). Refused: strict throws naming the shape and
  // cuDNN's reason; otherwise logs it once and returns false.
  bool takes(int64_t b, int64_t s, int64_t heads, int64_t hd, DType dtype, double dropout_p);

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
  bool deterministic_, strict_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  std::map<Key, bool> takes_;    // by the forward's key: both plans built (true) or refused
  void* seed_offset_ = nullptr;  // device int64[4]: the dropout's Philox seed [0] and offset [2]
};

}  // namespace mtnlg
