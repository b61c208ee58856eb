#include "core/cuda/gemm_epilogue.h"

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <type_traits>

#include "core/cuda/cuda_check.h"

namespace mtnlg {

namespace {

// The largest power of two up to 256 that divides the address.
int alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int align = 256;
  while (align > 1 && a % static_cast<uintptr_t>(align) != 0) align /= 2;
  return align;
}

// A cuBLASLt object destroyed through the library it came from.
template <typename H>
struct LtDeleter {
  cublasStatus_t (*destroy)(H) = nullptr;
  void operator()(H h) const { (void)destroy(h); }
};
template <typename H>
using LtPtr = std::unique_ptr<std::remove_pointer_t<H>, LtDeleter<H>>;

template <typename T>
void set(const CublasLtLibrary& lib, cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
         const T& value) {
  CUBLAS_CHECK(lib.desc_set(desc, attr, &value, sizeof value));
}

}  // namespace

EpilogueGemm::EpilogueGemm(void* workspace, size_t bytes)
    : workspace_(workspace), workspace_bytes_(bytes) {
  CUBLAS_CHECK(lib_.create(&handle_));
}

EpilogueGemm::~EpilogueGemm() {
  (void)lib_.destroy(handle_);
}

std::optional<cublasLtMatmulAlgo_t> EpilogueGemm::algorithm(
    const Key& key, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d) {
  if (const auto it = algorithms_.find(key); it != algorithms_.end()) return it->second;
  cublasLtMatmulPreference_t raw = nullptr;
  CUBLAS_CHECK(lib_.pref_create(&raw));
  const LtPtr<cublasLtMatmulPreference_t> pref(raw, {lib_.pref_destroy});
  const uint64_t ws = workspace_bytes_;
  CUBLAS_CHECK(lib_.pref_set(raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  // The alignments of A, B, C and D: the key's last four entries.
  const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (size_t i = 0; i < 4; ++i) {
    const auto align = static_cast<uint32_t>(key[key.size() - 4 + i]);
    CUBLAS_CHECK(lib_.pref_set(raw, attrs[i], &align, sizeof align));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = lib_.heuristic(handle_, desc, a, b, c, d, raw, 1, &result, &found);
  std::optional<cublasLtMatmulAlgo_t> algo;
  if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
    algo = result.algo;
  } else if (st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_SUCCESS) {
    CUBLAS_CHECK(st);
  }
  algorithms_.emplace(key, algo);
  return algo;
}

bool EpilogueGemm::linear_bias(Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias,
                               Tensor* gelu_out, cudaStream_t stream) {
  const DType dt = x.dtype();
  if (dt != DType::kBF16 && dt != DType::kF16) return false;
  const Tensor x2 = x.as_2d();
  const int64_t rows = x2.dim(0), in = x2.dim(1), out = w.ndim() == 2 ? w.dim(0) : 0;
  if (rows == 0 || in == 0 || out == 0 || in % 8 != 0 || out % 8 != 0) return false;
  // Anything unexpected goes the separate way, whose checks name it.
  for (const Tensor* t : std::initializer_list<const Tensor*>{&y, &x, &w, &bias, gelu_out})
    if (t != nullptr && (t->device() != Device::kCUDA || t->dtype() != dt)) return false;
  // (An in-place GeLU, gelu_out over y, would make the epilogue's two outputs one.)
  if (w.dim(1) != in || bias.numel() != out || y.numel() != rows * out ||
      (gelu_out && (gelu_out->numel() != rows * out || gelu_out->data() == y.data())))
    return false;
  void* d = gelu_out ? gelu_out->data() : y.data();
  for (const void* p : {x.data(), w.data(), bias.data(), y.data(), d})
    if (alignment(p) < 16) return false;
  const cudaDataType_t type = dt == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;

  // Column-major, as cuBLASLt reads: y^T [out, rows] = w [in, out]^T x^T [in, rows], the bias one
  // value per row of y^T (per output feature).
  cublasLtMatmulDesc_t raw_desc = nullptr;
  CUBLAS_CHECK(lib_.desc_create(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const LtPtr<cublasLtMatmulDesc_t> desc(raw_desc, {lib_.desc_destroy});
  set(lib_, raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set(lib_, raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  const cublasLtEpilogue_t epilogue =
      gelu_out ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS;
  set(lib_, raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  set(lib_, raw_desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.data());
  if (gelu_out) {
    set(lib_, raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, y.data());
    set(lib_, raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, out);
  }
  cublasLtMatrixLayout_t ra = nullptr, rb = nullptr, rd = nullptr;
  CUBLAS_CHECK(
      lib_.layout_create(&ra, type, static_cast<uint64_t>(in), static_cast<uint64_t>(out), in));
  const LtPtr<cublasLtMatrixLayout_t> la(ra, {lib_.layout_destroy});
  CUBLAS_CHECK(
      lib_.layout_create(&rb, type, static_cast<uint64_t>(in), static_cast<uint64_t>(rows), in));
  const LtPtr<cublasLtMatrixLayout_t> lb(rb, {lib_.layout_destroy});
  CUBLAS_CHECK(
      lib_.layout_create(&rd, type, static_cast<uint64_t>(out), static_cast<uint64_t>(rows), out));
  const LtPtr<cublasLtMatrixLayout_t> ld(rd, {lib_.layout_destroy});

  // (The bias's and the auxiliary output's alignments are part of the kind.)
  const Key key{0,
                rows,
                in,
                out,
                static_cast<int64_t>(dt),
                gelu_out != nullptr,
                alignment(bias.data()),
                gelu_out ? alignment(y.data()) : 0,
                alignment(w.data()),
                alignment(x.data()),
                alignment(d),
                alignment(d)};
  const std::optional<cublasLtMatmulAlgo_t> algo = algorithm(key, raw_desc, ra, rb, rd, rd);
  if (!algo) return false;
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(lib_.matmul(handle_, raw_desc, &alpha, w.data(), ra, x.data(), rb, &beta, d, rd, d,
                           rd, &*algo, workspace_, workspace_bytes_, stream));
  return true;
}

bool EpilogueGemm::fp8(Tensor& c, const uint8_t* a, Fp8Format fa, const uint8_t* b, Fp8Format fb,
                       int64_t m, int64_t n, int64_t k, double alpha, double beta,
                       cudaStream_t stream) {
  if (fa == Fp8Format::kE5M2 && fb == Fp8Format::kE5M2) return false;
  if (c.device() != Device::kCUDA || (c.dtype() != DType::kBF16 && c.dtype() != DType::kF32))
    return false;
  if (m <= 0 || n <= 0 || k <= 0 || m % 16 != 0 || n % 16 != 0 || k % 16 != 0) return false;
  for (const void* p : {static_cast<const void*>(a), static_cast<const void*>(b),
                        static_cast<const void*>(c.data())})
    if (alignment(p) < 16) return false;
  const auto type = [](Fp8Format f) {
    return f == Fp8Format::kE4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2;
  };
  const cudaDataType_t c_type = c.dtype() == DType::kBF16 ? CUDA_R_16BF : CUDA_R_32F;
  // Column-major, as cuBLASLt reads: c^T [n, m] = (b^T [k, n])^T a^T [k, m], both operands
  // k-major (A transposed, B not: the layout FP8 takes). The scales stay 1: alpha carries both
  // inverses.
  cublasLtMatmulDesc_t raw_desc = nullptr;
  CUBLAS_CHECK(lib_.desc_create(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const LtPtr<cublasLtMatmulDesc_t> desc(raw_desc, {lib_.desc_destroy});
  set(lib_, raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set(lib_, raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  cublasLtMatrixLayout_t ra = nullptr, rb = nullptr, rc = nullptr;
  CUBLAS_CHECK(
      lib_.layout_create(&ra, type(fb), static_cast<uint64_t>(k), static_cast<uint64_t>(n), k));
  const LtPtr<cublasLtMatrixLayout_t> la(ra, {lib_.layout_destroy});
  CUBLAS_CHECK(
      lib_.layout_create(&rb, type(fa), static_cast<uint64_t>(k), static_cast<uint64_t>(m), k));
  const LtPtr<cublasLtMatrixLayout_t> lb(rb, {lib_.layout_destroy});
  CUBLAS_CHECK(
      lib_.layout_create(&rc, c_type, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n));
  const LtPtr<cublasLtMatrixLayout_t> lc(rc, {lib_.layout_destroy});
  const Key key{1,
                m,
                n,
                k,
                static_cast<int64_t>(c.dtype()),
                static_cast<int64_t>(fa),
                static_cast<int64_t>(fb),
                beta != 0.0,
                alignment(b),
                alignment(a),
                alignment(c.data()),
                alignment(c.data())};
  const std::optional<cublasLtMatmulAlgo_t> algo = algorithm(key, raw_desc, ra, rb, rc, rc);
  if (!algo) return false;
  const auto alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  CUBLAS_CHECK(lib_.matmul(handle_, raw_desc, &alpha_f, b, ra, a, rb, &beta_f, c.data(), rc,
                           c.data(), rc, &*algo, workspace_, workspace_bytes_, stream));
  return true;
}

}  // namespace mtnlg
