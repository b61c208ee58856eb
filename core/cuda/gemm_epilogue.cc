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

std::optional<cublasLtMatmulAlgo_t> EpilogueGemm::algorithm(const Key& key,
                                                            cublasLtMatmulDesc_t desc,
                                                            cublasLtMatrixLayout_t a,
                                                            cublasLtMatrixLayout_t b,
                                                            cublasLtMatrixLayout_t d) {
  if (const auto it = algorithms_.find(key); it != algorithms_.end()) return it->second;
  cublasLtMatmulPreference_t raw = nullptr;
  CUBLAS_CHECK(lib_.pref_create(&raw));
  const LtPtr<cublasLtMatmulPreference_t> pref(raw, {lib_.pref_destroy});
  const uint64_t ws = workspace_bytes_;
  CUBLAS_CHECK(lib_.pref_set(raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  // Alignments of w (A), x (B), and the output (C and D): the key's last entries but the bias's.
  const uint32_t align_a = static_cast<uint32_t>(std::get<5>(key));
  const uint32_t align_b = static_cast<uint32_t>(std::get<6>(key));
  const uint32_t align_d = static_cast<uint32_t>(std::get<7>(key));
  CUBLAS_CHECK(
      lib_.pref_set(raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a));
  CUBLAS_CHECK(
      lib_.pref_set(raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b));
  CUBLAS_CHECK(
      lib_.pref_set(raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof align_d));
  CUBLAS_CHECK(
      lib_.pref_set(raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof align_d));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = lib_.heuristic(handle_, desc, a, b, d, d, raw, 1, &result, &found);
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

  const Key key{rows,
                in,
                out,
                static_cast<int>(dt),
                gelu_out != nullptr,
                alignment(w.data()),
                alignment(x.data()),
                alignment(d),
                alignment(bias.data()),
                gelu_out ? alignment(y.data()) : 0};
  const std::optional<cublasLtMatmulAlgo_t> algo = algorithm(key, raw_desc, ra, rb, rd);
  if (!algo) return false;
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(lib_.matmul(handle_, raw_desc, &alpha, w.data(), ra, x.data(), rb, &beta, d, rd, d,
                           rd, &*algo, workspace_, workspace_bytes_, stream));
  return true;
}

}  // namespace mtnlg
