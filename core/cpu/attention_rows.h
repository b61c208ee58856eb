// Row kernels shared by the CPU attention paths (attention_cpu.cc in the model's dtype,
// attention_bf16.cc with bf16 products): the causal softmax of one score row through its
// log-sum-exp, its recomputation from that, and its dropout.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/cpu/kernels_cpu.h"

namespace mtnlg::cpu {

// The causal softmax of row i through its log-sum-exp, which it returns: p[j] = exp(p[j] - lse)
// for j <= i (the scaled scores in place), zeros p[i+1..s). Backward recomputes the same values
// from the same scores and lse with causal_probs_row, bit for bit.
// noinline and `j < i + 1`: otherwise GCC 12 does not call libmvec's vector expf here.
template <typename T>
__attribute__((noinline)) void causal_probs_row(T* p, int64_t i, int64_t s, T lse) {
#pragma omp simd
  for (int64_t j = 0; j < i + 1; ++j) p[j] = std::exp(p[j] - lse);
  for (int64_t j = i + 1; j < s; ++j) p[j] = 0;
}

template <typename T>
__attribute__((noinline)) T causal_softmax_row_lse(T* p, int64_t i, int64_t s) {
  T mx = p[0];
  for (int64_t j = 1; j <= i; ++j) mx = p[j] > mx ? p[j] : mx;
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < i + 1; ++j) sum += std::exp(p[j] - mx);
  const T lse = mx + std::log(sum);
  causal_probs_row(p, i, s, lse);
  return lse;
}

// pd[0..i] = p[0..i] * keep / (1 - p), zeros above the diagonal. Element index of (i, j) is
// row_base + j (backend.h's ((b*heads + h)*s + i)*s + j).
template <typename T>
void dropout_row(T* pd, const T* p, int64_t i, int64_t s, uint64_t row_base, KeepMask& mask,
                 T scale) {
  for (int64_t j = 0; j <= i; ++j) pd[j] = mask.keep(row_base + j) ? p[j] * scale : T(0);
  for (int64_t j = i + 1; j < s; ++j) pd[j] = 0;
}

}  // namespace mtnlg::cpu
