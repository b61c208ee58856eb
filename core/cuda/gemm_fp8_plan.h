// The workspace Backend::gemm_fp8 takes on CUDA (core/cuda/gemm_fp8.cc): both operands packed as
// FP8 bytes in cuBLASLt's TN layout, a as [m, k] and then b as [n, k] from a 256-byte boundary.
// Plain C++, no CUDA headers: the planner sizes the kernel scratch with the same formula
// (cmd/planner.cc, --dry-run's cuda_fp8_pack_bytes).
#pragma once

#include <cstdint>

namespace mtnlg {

// The offset of b's bytes: a's bytes rounded up to 256 (cuBLASLt wants aligned operands).
inline int64_t fp8_pack_b_offset(int64_t m, int64_t k) {
  return (m * k + 255) / 256 * 256;
}

// Whether the pack and cuBLASLt's FP8 GEMM take an m x n x k product whose operands are stored
// with a_rows and b_rows rows: every size a multiple of 16 (cuBLASLt's FP8 kernels want it), and
// the pack grid's y extent (a 32-row tile each) within CUDA's 65535.
inline bool fp8_pack_applies(int64_t m, int64_t n, int64_t k, int64_t a_rows, int64_t b_rows) {
  return m > 0 && n > 0 && k > 0 && m % 16 == 0 && n % 16 == 0 && k % 16 == 0 &&
         (a_rows + 31) / 32 < 65536 && (b_rows + 31) / 32 < 65536;
}

// The bytes the pair takes from the backend's workspace for an m x n x k product.
inline int64_t fp8_pack_bytes(int64_t m, int64_t n, int64_t k) {
  return fp8_pack_b_offset(m, k) + n * k;
}

}  // namespace mtnlg
