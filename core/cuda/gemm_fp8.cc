// Backend::gemm_fp8 on CUDA: the operands packed as FP8 bytes (core/cuda/fp8_cuda.cu) and
// multiplied by cuBLASLt's FP8 GEMM (core/cuda/gemm_epilogue.h) where it applies; elsewhere the
// bf16 GEMM on the same values (the default), said once.
#include <spdlog/spdlog.h>

#include "core/cuda/cuda_backend_impl.h"
#include "core/cuda/gemm_fp8_plan.h"
#include "core/cuda/kernels_cuda.h"

namespace mtnlg {

void CudaBackend::do_gemm_fp8(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b,
                              bool trans_b, double alpha, double beta, Fp8Format fa, Fp8Format fb) {
  const Tensor a2 = a.as_2d(), b2 = b.as_2d();
  const int64_t m = trans_a ? a2.dim(1) : a2.dim(0), k = trans_a ? a2.dim(0) : a2.dim(1);
  const int64_t n = trans_b ? b2.dim(0) : b2.dim(1);
  // cuBLASLt's FP8 kernels take both operands k-major: a as [m, k], b as [n, k] (the pack
  // transposes what is stored otherwise). The pack grid's y extent bounds the stored rows.
  const bool shaped = fp8_pack_applies(m, n, k, a2.dim(0), b2.dim(0));
  if (shaped) {
    const int64_t a_bytes = fp8_pack_b_offset(m, k);
    auto* packed = static_cast<uint8_t*>(ws_.get(static_cast<size_t>(fp8_pack_bytes(m, n, k))));
    fp8_pack_cuda(packed, a2, trans_a, fa, stream());
    fp8_pack_cuda(packed + a_bytes, b2, !trans_b, fb, stream());
    if (epilogue_->fp8(c, packed, fa, packed + a_bytes, fb, m, n, k, alpha, beta, stream())) return;
  }
  if (!fp8_fallback_logged_) {
    fp8_fallback_logged_ = true;
    spdlog::warn(
        "gemm_fp8 [{} x {} x {}]: cuBLASLt's FP8 GEMM does not take it ({}); the bf16 GEMM "
        "multiplies the FP8 values (the same values, at bf16's speed); said once",
        m, n, k,
        shaped ? "no FP8 algorithm for the shapes on this GPU" : "a size not a multiple of 16");
  }
  Backend::do_gemm_fp8(c, a, trans_a, b, trans_b, alpha, beta, fa, fb);
}

}  // namespace mtnlg
