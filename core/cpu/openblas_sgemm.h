// bf16 products on the fp32 GEMM's own micro-kernel, for CPUs where oneDNN 2.6 has no bf16
// matmul (AVX2 only): OpenBLAS's sgemm kernel, found at run time, fed by packing routines of
// ours that read bf16 and write the kernel's fp32 panels.
//
// Why: the fp32 fallback of core/cpu/matmul_bf16 widens operands into fp32 buffers and calls
// sgemm, which then packs those buffers again: a write and a read of every operand through
// memory that fp32 training does not have, 3-6% of each product. OpenBLAS's packing already
// copies every operand block into the layout its micro-kernel reads; doing that copy from bf16
// removes the widened buffers altogether, and reads half the bytes fp32's packing reads. The
// micro-kernel (hand-scheduled assembly per CPU family) is the part a GEMM of our own could not
// match (docs/bf16-without-avx512.md: ours ran at 0.95 of it).
//
// How it is found: Debian's OpenBLAS is a DYNAMIC_ARCH build that exports each CPU family's
// kernels under their own names (sgemm_kernel_HASWELL, sgemm_incopy_ZEN, ...) and the table it
// dispatches through (`gotoblas`, pointing at gotoblas_<FAMILY>). The family in use is the table
// whose address `gotoblas` holds; its kernel, beta and copy routines are then looked up by name.
// Nothing is trusted unchecked: the packing layout (groups of the kernel's unroll along a
// dimension, then the tail in halving widths) is compared value for value with OpenBLAS's own copy
// routines on awkward shapes, and a product through the kernel with a float64 sum. Where any step
// fails (another BLAS, a build without the exported names, an unexpected layout), available()
// says why and matmul_bf16 widens as before.
//
// The loop is GotoBLAS's (OpenBLAS's driver/level3): k in blocks of Q (halved evenly when under
// 2Q), a block of op(a) packed per (k block, column block), one of op(b) per (k block, row block)
// and the kernel over each pair. As with OpenBLAS's own sgemm, the kernel's full tiles and its
// tails round differently, so where a call's edges fall (the threads' shares) can move a last bit:
// bit-reproducible at a given thread count (core/cpu/gemm_cpu.cc says the same of fp32).
#pragma once

#include <cstdint>
#include <string>

namespace mtnlg::cpu {

class OpenblasSgemm {
 public:
  // The process's instance (resolved and checked once, on first use).
  static const OpenblasSgemm& get();

  bool available() const { return ok_; }
  // The CPU family whose kernels run ("HASWELL"), or why none does.
  const std::string& describe() const { return what_; }
  // Whether MTNLG_BF16_FALLBACK=widen asked for the widening fallback instead (benchmarks; unset or
  // `kernel`: this path where available; any other value is an error naming the variable).
  static bool disabled_by_env();

  // c[m, n] (row-major, fp32, rows ld_c apart) = alpha * op(a) @ op(b) + beta * c on the calling
  // thread; a and b bf16 bits, row-major, op(x) = x^T when trans_x (a then stored [k, m], b
  // [n, k]), rows ld_x apart. beta 0 ignores c's contents. Requires available().
  void gemm(float* c, int64_t ld_c, const uint16_t* a, int64_t ld_a, bool trans_a,
            const uint16_t* b, int64_t ld_b, bool trans_b, int64_t m, int64_t n, int64_t k,
            float alpha, float beta) const;

  // The packing of one block as the kernel reads it: rows x k of op(x) in groups of `unroll` rows
  // (then the tail in halving widths), each group k-major. Element (i, l) is at src[i + l * ld]
  // when rows_contiguous, else at src[l + i * ld]. For tests.
  static void pack(float* dst, const uint16_t* src, int64_t k, int64_t rows, int64_t ld,
                   bool rows_contiguous, int64_t unroll);

  using Kernel = int (*)(long, long, long, float, float*, float*, float*, long);
  using Beta = int (*)(long, long, long, float, float*, long, float*, long, float*, long);
  using Copy = int (*)(long, long, float*, long, float*);

 private:
  OpenblasSgemm();
  bool resolve();
  bool check_packing(Copy copy, bool rows_contiguous, int64_t unroll, std::string& why) const;
  bool check_product(std::string& why) const;

  bool ok_ = false;
  std::string what_;
  Kernel kernel_ = nullptr;
  Beta beta_ = nullptr;
  Copy incopy_ = nullptr, itcopy_ = nullptr, oncopy_ = nullptr, otcopy_ = nullptr;
  int64_t p_ = 256, q_ = 256, r_ = 4096, unroll_m_ = 0, unroll_n_ = 0;
};

}  // namespace mtnlg::cpu
