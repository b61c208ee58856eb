// Row-major GEMMs on cuBLAS. cuBLAS is column-major, and a row-major matrix read as
// column-major is its transpose, so C = op(A) op(B) (row-major) is computed as
// C^T = op(B)^T op(A)^T (column-major): pass B first, A second, and swap m and n.
// bf16/fp16 operands accumulate in fp32 (CUBLAS_COMPUTE_32F); fp32 runs plain fp32 (no TF32),
// because the CPU backend is the reference that tests compare with; f64 runs in f64.
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

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kF64:
      return CUDA_R_64F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      throw unsupported(std::string("gemm on CUDA: dtype ") + dtype_name(t) +
                        " (f32, f64, bf16, f16)");
  }
}

// The (alpha, beta) scalars in the compute type cuBLAS reads them as.
struct Scalars {
  union {
    float f;
    double d;
  } alpha, beta;
  cublasComputeType_t compute;
};

Scalars scalars(DType ab, double alpha, double beta) {
  Scalars s{};
  if (ab == DType::kF64) {
    s.alpha.d = alpha;
    s.beta.d = beta;
    s.compute = CUBLAS_COMPUTE_64F;
  } else {
    s.alpha.f = static_cast<float>(alpha);
    s.beta.f = static_cast<float>(beta);
    s.compute = CUBLAS_COMPUTE_32F;
  }
  return s;
}

void check_types(DType ab, DType c) {
  MTNLG_CHECK_MSG(c == ab || (c == DType::kF32 && (ab == DType::kBF16 || ab == DType::kF16)),
                  "gemm on CUDA: " << dtype_name(ab) << " operands with a " << dtype_name(c)
                                   << " result (want the same dtype, or f32 for bf16/f16)");
}

}  // namespace

void gemm_cuda(const Blas& blas, Tensor& c, const Tensor& a, bool trans_a, const Tensor& b,
               bool trans_b, double alpha, double beta) {
  const Tensor a2 = a.as_2d(), b2 = b.as_2d(), c2 = c.as_2d();
  const int64_t m = c2.dim(0), n = c2.dim(1);
  const int64_t k = trans_a ? a2.dim(0) : a2.dim(1);
  MTNLG_CHECK_MSG(a.dtype() == b.dtype(), "gemm: a " << a.str() << " and b " << b.str());
  check_types(a.dtype(), c.dtype());
  MTNLG_CHECK_MSG((trans_a ? a2.dim(1) : a2.dim(0)) == m,
                  "gemm: a " << a.str() << (trans_a ? "^T" : "") << " vs c " << c.str());
  MTNLG_CHECK_MSG((trans_b ? b2.dim(1) : b2.dim(0)) == k && (trans_b ? b2.dim(0) : b2.dim(1)) == n,
                  "gemm: b " << b.str() << (trans_b ? "^T" : "") << " vs a " << a.str()
                             << (trans_a ? "^T" : "") << " and c " << c.str());
  if (m == 0 || n == 0) return;
  if (k == 0) {  // empty product: c = beta * c, without relying on cuBLAS's k == 0 handling
    cudaStream_t stream = nullptr;
    CUBLAS_CHECK(blas.lib->get_stream(blas.handle, &stream));
    if (beta == 0.0) {
      fill_cuda(c, 0.0, stream);  // beta = 0 never reads c, as in BLAS
    } else {
      scale_cuda(c, beta, stream);
    }
    return;
  }
  // Leading dimensions are the row-major column counts of each buffer as stored.
  gemm_strided_batched_cuda(blas, a.dtype(), c.dtype(), trans_a, trans_b, m, n, k, alpha, a2.data(),
                            a2.dim(1), 0, b2.data(), b2.dim(1), 0, beta, c2.data(), n, 0, 1);
}

void gemm_strided_batched_cuda(const Blas& blas, DType ab_type, DType c_type, bool trans_a,
                               bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                               const void* a, int64_t lda, int64_t stride_a, const void* b,
                               int64_t ldb, int64_t stride_b, double beta, void* c, int64_t ldc,
                               int64_t stride_c, int64_t batch) {
  check_types(ab_type, c_type);
  if (m == 0 || n == 0 || batch == 0) return;
  const Scalars s = scalars(ab_type, alpha, beta);
  const cudaDataType_t tab = cuda_type(ab_type), tc = cuda_type(c_type);
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (batch == 1 && stride_a == 0 && stride_b == 0 && stride_c == 0) {
    CUBLAS_CHECK(blas.lib->gemm_ex(blas.handle, op_b, op_a, to_int(n, "n"), to_int(m, "m"),
                                   to_int(k, "k"), &s.alpha, b, tab, to_int(ldb, "ldb"), a, tab,
                                   to_int(lda, "lda"), &s.beta, c, tc, to_int(ldc, "ldc"),
                                   s.compute, CUBLAS_GEMM_DEFAULT));
    return;
  }
  CUBLAS_CHECK(blas.lib->gemm_strided_batched_ex(
      blas.handle, op_b, op_a, to_int(n, "n"), to_int(m, "m"), to_int(k, "k"), &s.alpha, b, tab,
      to_int(ldb, "ldb"), stride_b, a, tab, to_int(lda, "lda"), stride_a, &s.beta, c, tc,
      to_int(ldc, "ldc"), stride_c, to_int(batch, "batch"), s.compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace mtnlg
