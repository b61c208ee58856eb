// bf16 GEMM on the CPU through oneDNN's matmul primitive, which picks AMX-BF16 (or AVX512-BF16)
// on CPUs that have it: several times the fp32 GEMM rate here. Inputs bf16, products summed in
// fp32, the output fp32 or bf16 (rounded once, at the end).
//
// Primitives are created once per shape (creation costs milliseconds) and cached by the whole
// description (sizes, strides, transposes, output dtype, alpha, beta); the cache belongs to this
// object (one per CpuBackend). Thread-safe: lookups take a mutex and each call executes on its
// own stream (oneDNN primitives may run concurrently). oneDNN threads each call itself (OpenMP,
// the caller's thread count).
#pragma once

#include <cstdint>
#include <memory>

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
  MatmulBf16();
  ~MatmulBf16();
  MatmulBf16(const MatmulBf16&) = delete;
  MatmulBf16& operator=(const MatmulBf16&) = delete;

  // c[m, n] = alpha * op(a) @ op(b) + beta * c, all row-major and dense; op(x) = x^T when
  // trans_x (a stored [k, m], b stored [n, k]). c is float when !c_bf16, else bf16 bits.
  void run(void* c, bool c_bf16, const uint16_t* a, bool trans_a, const uint16_t* b, bool trans_b,
           int64_t m, int64_t n, int64_t k, float alpha, float beta);

  // The general (strided, batched) form; see Bf16Gemm.
  void run(const Bf16Gemm& g);

  // Primitives created so far (for tests: one per distinct shape).
  int64_t cached() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mtnlg::cpu
