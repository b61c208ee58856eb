// bf16 GEMM on the CPU through oneDNN's matmul primitive, which picks AMX-BF16 (or AVX512-BF16)
// on CPUs that have it: several times the fp32 GEMM rate here. Inputs bf16, products summed in
// fp32, the output fp32 or bf16 (rounded once, at the end).
//
// Primitives are created once per shape (creation costs milliseconds) and cached by (m, n, k,
// transposes, output dtype, alpha, beta); the cache belongs to this object (one per CpuBackend).
// Thread-safe: attention calls GEMMs from inside its own OpenMP loop, so lookups take a mutex
// and each call executes on its own stream (oneDNN primitives may run concurrently).
#pragma once

#include <cstdint>
#include <memory>

namespace mtnlg::cpu {

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

  // Primitives created so far (for tests: one per distinct shape).
  int64_t cached() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mtnlg::cpu
