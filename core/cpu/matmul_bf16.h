// bf16 GEMM on the CPU through oneDNN's matmul primitive, which picks AMX-BF16 (or AVX512-BF16)
// on CPUs that have it: several times the fp32 GEMM rate here. Inputs bf16, products summed in
// fp32, the output fp32 or bf16 (rounded once, at the end).
//
// Primitives are created once per shape (creation costs milliseconds) and cached by the whole
// description (sizes, strides, transposes, output dtype, alpha, beta); the cache belongs to this
// object (one per CpuBackend). Thread-safe: lookups take a mutex and each call executes on its
// own stream (oneDNN primitives may run concurrently). oneDNN threads each call itself (OpenMP,
// the caller's thread count).
//
// Weights held in the kernel's layout: oneDNN's fastest kernels read b in a blocked layout of
// their own; given a plain b they copy it into that layout inside every call (3-16% of a
// forward GEMM here). run_weight() reorders each weight into its blocked copy on its first call
// in a window (the calls between two end_weights_window()) and reuses the copy for the rest of
// it, so a weight is reordered once per optimizer step instead of once per micro-batch; the
// results are bit for bit those of run() (the same kernel reads the same values). A copy's
// memory is kept for the next window (allocating and first-touching tens of MB per iteration
// cost more than the reorder saved) and freed after a window that did not use it. The copies
// are allocated through the allocator given at construction, so the backend's memory counter
// sees them.
//
// On a CPU where oneDNN has no bf16 matmul (before AVX-512: oneDNN 2.6 refuses bf16 on AVX2),
// every product runs on the fp32 GEMM's kernel instead: the same products (a bf16 x bf16 product
// is exact in fp32) summed in fp32, so that a portable build trains bf16 recipes on every node.
// Where OpenBLAS's kernel is found (core/cpu/openblas_sgemm.h) its packing reads the bf16
// operands directly, weights too (run_weight() is run()); elsewhere the operands are widened for
// the fp32 GEMM, weights into fp32 copies once per window (both uses of a linear layer's weight,
// w^T and w, share its copy). describe() says which path runs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace mtnlg::cpu {

// `batch` products c_i = alpha * op(a_i) @ op(b_i) + beta * c_i, row-major, where x_i starts
// stride_x elements after x_{i-1} and rows are ld_x elements apart. op(x) = x^T when trans_x:
// a_i is then stored [k, m] (ld_a >= m), b_i [n, k] (ld_b >= k); else a_i [m, k], b_i [k, n].
// c is float, or bf16 bits when c_bf16. Batches must not interleave (stride >= rows * ld):
// oneDNN 2.6 crashes creating such primitives, so callers stage strided data densely first.
struct Bf16Gemm {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  const uint16_t* a = nullptr;
  int64_t ld_a = 0, stride_a = 0;
  bool trans_a = false;
  const uint16_t* b = nullptr;
  int64_t ld_b = 0, stride_b = 0;
  bool trans_b = false;
  void* c = nullptr;
  int64_t ld_c = 0, stride_c = 0;
  bool c_bf16 = false;
  float alpha = 1.0f, beta = 0.0f;
};

class MatmulBf16 {
 public:
  // alloc(bytes): 64-byte-aligned storage of at least that many bytes, for weight copies
  // (Tensor::cpu when empty).
  using Allocator = std::function<Tensor(int64_t bytes)>;
  // use_onednn false: the fp32 fallback even where oneDNN could (for tests). use_openblas_kernel
  // false: the fallback widens operands for the fp32 GEMM even where OpenBLAS's kernel is found
  // (for tests; MTNLG_BF16_FALLBACK=widen does the same for every instance).
  explicit MatmulBf16(Allocator alloc = {}, bool use_onednn = true,
                      bool use_openblas_kernel = true);
  ~MatmulBf16();
  MatmulBf16(const MatmulBf16&) = delete;
  MatmulBf16& operator=(const MatmulBf16&) = delete;

  // c[m, n] = alpha * op(a) @ op(b) + beta * c, all row-major and dense; op(x) = x^T when
  // trans_x (a stored [k, m], b stored [n, k]). c is float when !c_bf16, else bf16 bits.
  // b_weight: b is a weight, as in run_weight().
  void run(void* c, bool c_bf16, const uint16_t* a, bool trans_a, const uint16_t* b, bool trans_b,
           int64_t m, int64_t n, int64_t k, float alpha, float beta, bool b_weight = false);

  // The general (strided, batched) form; see Bf16Gemm.
  void run(const Bf16Gemm& g);

  // run(g) where g.b is a weight (batch 1) the caller leaves unchanged until the window ends:
  // the window's first call for a weight (its address, shape, transpose and the kernel's
  // layout) reorders it into its blocked copy, later calls reuse the copy.
  void run_weight(const Bf16Gemm& g);
  // Ends a window (the weights may change from here): every copy is stale until its next use;
  // the copies this window did not use are freed.
  void end_weights_window();
  // Bytes of the weight copies held (stale ones too), and whether a copy of this window was made
  // from memory overlapping [begin, end) (a write there would leave it stale).
  int64_t weight_bytes() const;
  bool holds_weight(const void* begin, const void* end) const;
  // Whether oneDNN multiplies bf16 on this CPU (else the fp32 fallback runs).
  static bool onednn_available();
  bool uses_onednn() const;
  // Whether this instance's fallback runs OpenBLAS's fp32 kernel on bf16 packing (no weight
  // copies then), and whether an instance made with the defaults does (for the planner).
  bool uses_openblas_kernel() const;
  static bool openblas_kernel_default();
  // Bytes run_weight's copy of a weight occupies for this problem (c bf16 or fp32) when oneDNN
  // runs on `threads` OpenMP threads (<= 0: every core, as a CpuBackend of 0 threads): the
  // planner's term, asked of oneDNN for the CPU it runs on (0 where it has no bf16 matmul). The
  // thread count matters: oneDNN blocks a weight for the threads it will split the product over
  // (on AMX CPUs the blocked copy of one weight differs by kilobytes between 1 and 2 threads), so
  // the question is asked under the run's count, not the caller's.
  // On the fp32 fallback a copy is the weight in fp32: n * k * 4 bytes; none through OpenBLAS's
  // kernel (openblas_kernel_default()), which packs the bf16 weight as it reads it.
  static int64_t weight_copy_bytes(int64_t m, int64_t n, int64_t k, bool trans_b, bool c_bf16,
                                   int threads);
  // The copies of a linear layer's weight [out, in] used both ways on `rows` rows with bf16
  // outputs: forward x w^T (n = out, k = in, transposed) and input gradient dy w (n = in,
  // k = out). oneDNN blocks each use its own way (two copies); the fallback shares one.
  static int64_t linear_weight_copy_bytes(int64_t rows, int64_t out, int64_t in, int threads);
  // What runs the bf16 products on this CPU, for the log: oneDNN and the ISA it dispatches to,
  // or the fp32 fallback and why.
  static std::string describe();

  // Primitives created so far (for tests: one per distinct shape).
  int64_t cached() const;

 private:
  void execute(const Bf16Gemm& g, bool weight);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mtnlg::cpu
