// Row-major GEMM on cuBLAS. cuBLAS is column-major, and a row-major matrix read as
// column-major is its transpose, so C = op(A) op(B) (row-major) is computed as
// C^T = op(B)^T op(A)^T (column-major): pass B first, A second, and swap m and n.
#include <climits>
#include <cstdint>

#include "core/cuda/cuda_check.h"
#include "core/cuda/kernels_cuda.h"
#include "core/cuda/launch_cuda.h"

namespace mtnlg {

namespace {

int to_int(int64_t v, const char* what) {
  MTNLG_CHECK_MSG(v <= INT_MAX, "gemm " << what << " = " << v << " exceeds cuBLAS's int range");
  return static_cast<int>(v);
}

}  // namespace

void gemm_cuda(cublasHandle_t handle, Tensor& c, const Tensor& a, bool trans_a, const Tensor& b,
               bool trans_b, double alpha, double beta) {
  const Tensor a2 = a.as_2d(), b2 = b.as_2d(), c2 = c.as_2d();
  const int64_t m = c2.dim(0), n = c2.dim(1);
  const int64_t k = trans_a ? a2.dim(0) : a2.dim(1);
  MTNLG_CHECK_MSG((trans_a ? a2.dim(1) : a2.dim(0)) == m,
                  "gemm: a " << a.str() << (trans_a ? "^T" : "") << " vs c " << c.str());
  MTNLG_CHECK_MSG((trans_b ? b2.dim(1) : b2.dim(0)) == k && (trans_b ? b2.dim(0) : b2.dim(1)) == n,
                  "gemm: b " << b.str() << (trans_b ? "^T" : "") << " vs a " << a.str()
                             << (trans_a ? "^T" : "") << " and c " << c.str());
  if (m == 0 || n == 0) return;
  if (k == 0) {  // empty product: c = beta * c, without relying on cuBLAS's k == 0 handling
    cudaStream_t stream = nullptr;
    CUBLAS_CHECK(cublasGetStream(handle, &stream));
    if (beta == 0.0) {
      fill_cuda(c, 0.0, stream);  // beta = 0 never reads c, as in BLAS
    } else {
      scale_cuda(c, beta, stream);
    }
    return;
  }

  // Leading dimensions are the row-major column counts of each buffer as stored.
  const int lda = to_int(a2.dim(1), "lda"), ldb = to_int(b2.dim(1), "ldb");
  const int ldc = to_int(n, "n");
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  dispatch_floating(c.dtype(), "gemm", [&](auto tag) {
    using T = decltype(tag);
    constexpr bool kF32 = sizeof(T) == 4;
    const cudaDataType_t type = kF32 ? CUDA_R_32F : CUDA_R_64F;
    // Plain fp32 compute (no TF32): the CPU backend is the reference and tests compare to it.
    const cublasComputeType_t compute = kF32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F;
    const T alpha_t = static_cast<T>(alpha), beta_t = static_cast<T>(beta);
    CUBLAS_CHECK(cublasGemmEx(handle, op_b, op_a, ldc, to_int(m, "m"), to_int(k, "k"), &alpha_t,
                              b2.data_as<T>(), type, ldb, a2.data_as<T>(), type, lda, &beta_t,
                              c2.data_as<T>(), type, ldc, compute, CUBLAS_GEMM_DEFAULT));
  });
}

}  // namespace mtnlg
