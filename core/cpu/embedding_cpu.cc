// Token + position embedding on the CPU, whole or one vocab-parallel shard of the word rows.
// Forward is parallel over rows. Backward scatters into dwte rows chosen by the tokens, which
// repeat, so it is parallel over column blocks instead: each thread owns a slice of every row and
// adds the tokens in order (no races, fixed order).
#include "core/cpu/cpu_backend.h"
#include "core/cpu/id_checks.h"
#include "core/cpu/kernels_cpu.h"
#include "core/dtype_dispatch.h"
#include "core/kernels/vocab_shard_math.h"

namespace mtnlg::cpu {
namespace {
constexpr int64_t kColBlock = 64;

// out: [b*s, c], tokens: [b*s], wte: the word rows [start, start + rows) of the vocabulary,
// [rows, c]; wpe: [>= s, c] or null (no positions). A token outside the rows gives 0 (another
// rank holds it): the whole table is start 0, rows V, with tokens already range-checked.
template <typename T>
void embedding_shard_forward(T* out, const int32_t* tokens, const T* wte, int64_t rows,
                             int64_t start, const T* wpe, int64_t b, int64_t s, int64_t c) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < b * s; ++r) {
    const int64_t local = kernels::shard_index(tokens[r], start, rows);
    const T* te = local >= 0 ? wte + local * c : nullptr;
    const T* pe = wpe != nullptr ? wpe + (r % s) * c : nullptr;
    T* y = out + r * c;
    if (te != nullptr && pe != nullptr) {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) y[j] = te[j] + pe[j];
    } else if (te != nullptr || pe != nullptr) {
      const T* src = te != nullptr ? te : pe;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) y[j] = src[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) y[j] = T(0.0f);
    }
  }
}

// dwte[tokens - start] += dout for held tokens; dwpe (or null) [t] += sum_b dout[b, t].
template <typename T>
void embedding_shard_backward(acc_t<T>* dwte, int64_t rows, int64_t start, acc_t<T>* dwpe,
                              const T* dout, const int32_t* tokens, int64_t b, int64_t s,
                              int64_t c) {
  const int64_t nb = (c + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static)
  for (int64_t ib = 0; ib < nb; ++ib) {
    const int64_t lo = ib * kColBlock, w = std::min(c, lo + kColBlock) - lo;
    for (int64_t r = 0; r < b * s; ++r) {
      const int64_t local = kernels::shard_index(tokens[r], start, rows);
      if (local < 0) continue;
      acc_t<T>* dte = dwte + local * c + lo;
      const T* dy = dout + r * c + lo;
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) dte[j] += dy[j];
    }
  }
  if (dwpe == nullptr) return;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < s; ++t) {
    acc_t<T>* dpe = dwpe + t * c;
    for (int64_t bi = 0; bi < b; ++bi) {
      const T* dy = dout + (bi * s + t) * c;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) dpe[j] += dy[j];
    }
  }
}

}  // namespace

}  // namespace mtnlg::cpu

namespace mtnlg {

// The backend's operations whose kernels are in this file (docs/backend.md, Adding an operation).
void CpuBackend::do_embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte,
                                      const Tensor& wpe) {
  enter();
  const int64_t b = tokens.dim(0), s = tokens.dim(1), c = wte.dim(1);  // checked by the front
  cpu::check_ids(tokens.data_as<int32_t>(), b * s, wte.dim(0), "embedding_forward", "token id",
                 "the data's vocabulary is larger than the model's (check model.vocab_size)");
  dispatch_dtype(Device::kCPU, wte.dtype(), "embedding_forward", [&](auto z) {
    using T = decltype(z);
    cpu::embedding_shard_forward(out.data_as<T>(), tokens.data_as<int32_t>(), wte.data_as<T>(),
                                 wte.dim(0), 0, wpe.data_as<T>(), b, s, c);
  });
}

void CpuBackend::do_embedding_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                                       const Tensor& tokens) {
  enter();
  const int64_t b = tokens.dim(0), s = tokens.dim(1), c = dwte.dim(1);  // checked by the front
  cpu::check_ids(tokens.data_as<int32_t>(), b * s, dwte.dim(0), "embedding_backward", "token id",
                 "the data's vocabulary is larger than the model's (check model.vocab_size)");
  dispatch_dtype(Device::kCPU, dout.dtype(), "embedding_backward", [&](auto z) {
    using T = decltype(z);
    using A = acc_t<T>;
    cpu::embedding_shard_backward(dwte.data_as<A>(), dwte.dim(0), 0, dwpe.data_as<A>(),
                                  dout.data_as<T>(), tokens.data_as<int32_t>(), b, s, c);
  });
}

void CpuBackend::do_embedding_shard_forward(Tensor& out, const Tensor& tokens,
                                            const Tensor& wte_local, const Tensor& wpe,
                                            int64_t vocab_start) {
  enter();
  const char* op = "embedding_shard_forward";
  const int64_t b = tokens.dim(0), s = tokens.dim(1), c = wte_local.dim(1);  // checked
  dispatch_dtype(Device::kCPU, wte_local.dtype(), op, [&](auto z) {
    using T = decltype(z);
    cpu::embedding_shard_forward(out.data_as<T>(), tokens.data_as<int32_t>(),
                                 wte_local.data_as<T>(), wte_local.dim(0), vocab_start,
                                 wpe.defined() ? wpe.data_as<T>() : nullptr, b, s, c);
  });
}

void CpuBackend::do_embedding_shard_backward(Tensor& dwte_local, Tensor& dwpe, const Tensor& dout,
                                             const Tensor& tokens, int64_t vocab_start) {
  enter();
  const char* op = "embedding_shard_backward";
  const int64_t b = tokens.dim(0), s = tokens.dim(1), c = dwte_local.dim(1);  // checked
  dispatch_dtype(Device::kCPU, dout.dtype(), op, [&](auto z) {
    using T = decltype(z);
    using A = acc_t<T>;
    cpu::embedding_shard_backward(dwte_local.data_as<A>(), dwte_local.dim(0), vocab_start,
                                  dwpe.defined() ? dwpe.data_as<A>() : nullptr, dout.data_as<T>(),
                                  tokens.data_as<int32_t>(), b, s, c);
  });
}

}  // namespace mtnlg
