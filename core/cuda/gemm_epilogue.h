// cuBLASLt's GEMMs: a linear layer's forward with its epilogue, and FP8 operands.
//
// A linear layer's forward in one cuBLASLt call: y = x w^T + bias with the bias added in the
// GEMM's epilogue, and optionally act_out = GeLU(y) (tanh approximation) with y kept as the
// epilogue's auxiliary output for GeLU's backward: one pass over [rows, out] instead of three
// (GEMM, bias add, GeLU). Backend::linear_bias_forward's CUDA side (core/cuda/cuda_backend.cu).
//
// Applies to bf16/fp16 operands (fp32 accumulation, outputs and bias in the operands' dtype)
// with in and out features multiples of 8 and every pointer 16-byte aligned; otherwise, or when
// cuBLASLt has no algorithm for the shapes, it does nothing and says so, and the backend runs
// the separate operations.
//
// FP8 (Backend::gemm_fp8's CUDA side): c = alpha a b^T + beta c with a [m, k] and b [n, k] FP8
// bytes (k contiguous in both: the "TN" layout cuBLASLt's FP8 kernels take), E4M3 or E5M2 (not
// both E5M2), c bf16 or f32, fp32 sums; m, n and k multiples of 16 and 16-byte aligned pointers,
// else (or with no algorithm for the shapes) nothing is done and the caller runs the bf16 GEMM.
//
// Algorithms are chosen once per shape (cuBLASLt's heuristic) and kept. One stream, one thread
// (the backend's).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>

#include "core/cuda/cublas_library.h"
#include "core/kernels/fp8_math.h"
#include "core/tensor.h"

namespace mtnlg {

class EpilogueGemm {
 public:
  // Opens cuBLASLt and makes its handle; its calls use `workspace` [bytes] (the backend's BLAS
  // workspace, core/cuda/device_overheads.h, which outlives this).
  EpilogueGemm(void* workspace, size_t bytes);
  ~EpilogueGemm();
  EpilogueGemm(const EpilogueGemm&) = delete;
  EpilogueGemm& operator=(const EpilogueGemm&) = delete;

  // y [rows, out] = x [rows, in] @ w [out, in]^T + bias [out]; with gelu_out, also
  // gelu_out = GeLU_tanh(y). Enqueued on `stream`; false when it does not apply (nothing done).
  bool linear_bias(Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias,
                   Tensor* gelu_out, cudaStream_t stream);

  // c [m, n] = alpha a b^T + beta c (above); false when it does not apply (nothing done).
  bool fp8(Tensor& c, const uint8_t* a, Fp8Format fa, const uint8_t* b, Fp8Format fb, int64_t m,
           int64_t n, int64_t k, double alpha, double beta, cudaStream_t stream);

 private:
  // What the algorithm depends on: the call's kind and shapes, then the alignments of A, B, C
  // and D (cuBLASLt's heuristic takes them into account).
  using Key = std::array<int64_t, 12>;
  std::optional<cublasLtMatmulAlgo_t> algorithm(const Key& key, cublasLtMatmulDesc_t desc,
                                                cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d);

  CublasLtLibrary lib_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, std::optional<cublasLtMatmulAlgo_t>> algorithms_;  // nullopt: none for the shape
};

}  // namespace mtnlg
