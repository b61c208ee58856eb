#include "model/vocab_parallel.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "parallel/mappings.h"

namespace mtnlg {

void vocab_parallel_embedding_forward(Backend& be, Tensor& out, const Tensor& tokens,
                                      const Tensor& wte_local, const Tensor& wpe,
                                      const VocabShard& shard, bool add_positions,
                                      Communicator* tensor) {
  MTNLG_CHECK_EQ(wte_local.dim(0), shard.size);
  be.embedding_shard_forward(out, tokens, wte_local, add_positions ? wpe : Tensor(), shard.start);
  // Each element is one rank's value plus zeros, or wte + wpe: the sum is exact.
  all_reduce_sum(out, tensor);
}

void vocab_parallel_embedding_backward(Backend& be, Tensor& dwte_local, Tensor& dwpe,
                                       const Tensor& dout, const Tensor& tokens,
                                       const VocabShard& shard) {
  MTNLG_CHECK_EQ(dwte_local.dim(0), shard.size);
  be.embedding_shard_backward(dwte_local, dwpe, dout, tokens, shard.start);
}

VocabParallelCEContext vocab_parallel_ce_allocate(Backend& be, int64_t rows) {
  return {be.alloc({rows}, DType::kF64), be.alloc({2, rows}, DType::kF64)};
}

double vocab_parallel_cross_entropy_forward(Backend& be, VocabParallelCEContext& ctx,
                                            const Tensor& logits, const Tensor& targets,
                                            const VocabShard& shard, Communicator* tensor) {
  MTNLG_CHECK_EQ(logits.dim(-1), shard.size);
  const int64_t n = logits.numel() / logits.dim(-1);
  MTNLG_CHECK_MSG(ctx.row_max.defined() && ctx.row_max.numel() == n && ctx.stats.numel() == 2 * n,
                  "vocab_parallel_cross_entropy_forward: statistics for "
                      << n << " rows not allocated (vocab_parallel_ce_allocate)");
  be.cross_entropy_shard_max(ctx.row_max, logits, shard.start, shard.vocab);
  all_reduce_max(ctx.row_max, tensor);
  be.cross_entropy_shard_stats(ctx.stats, logits, targets, ctx.row_max, shard.start, shard.vocab);
  all_reduce_sum(ctx.stats, tensor);
  // The loss, added in row order in double on the host (the same on every rank and backend).
  Tensor mx = ctx.row_max, st = ctx.stats;
  if (be.device() != Device::kCPU) {
    mx = Tensor::cpu({n}, DType::kF64);
    st = Tensor::cpu({2, n}, DType::kF64);
    be.copy(mx, ctx.row_max);
    be.copy(st, ctx.stats);
  }
  const double* m = mx.data_as<double>();
  const double* s = st.data_as<double>();
  double loss = 0.0;
  for (int64_t r = 0; r < n; ++r) loss += std::log(s[r]) + m[r] - s[n + r];
  return loss;
}

void vocab_parallel_cross_entropy_backward(Backend& be, Tensor& dlogits,
                                           const VocabParallelCEContext& ctx, const Tensor& logits,
                                           const Tensor& targets, const VocabShard& shard,
                                           double grad_scale) {
  const int64_t n = ctx.row_max.numel();
  const Tensor row_sum = ctx.stats.view({2 * n}).slice(0, n);
  be.cross_entropy_shard_backward(dlogits, logits, targets, ctx.row_max, row_sum, shard.start,
                                  shard.vocab, grad_scale);
}

TokenScores vocab_parallel_token_scores(const Tensor& logits, std::span<const int32_t> targets,
                                        const VocabShard& shard, Communicator* tensor) {
  MTNLG_CHECK(logits.device() == Device::kCPU);
  MTNLG_CHECK_EQ(logits.dim(1), shard.size);
  const int64_t n = logits.dim(0), width = shard.size;
  MTNLG_CHECK_EQ(static_cast<int64_t>(targets.size()), n);
  const int64_t real = std::clamp<int64_t>(shard.vocab - shard.start, 0, width);
  const DType dt = logits.dtype();
  MTNLG_CHECK(dt == DType::kF32 || dt == DType::kBF16 || dt == DType::kF16);
  const auto* raw = static_cast<const unsigned char*>(logits.data());
  auto at = [&](int64_t i, int64_t v) -> float {
    const int64_t k = i * width + v;
    if (dt == DType::kF32) return reinterpret_cast<const float*>(raw)[k];
    const uint16_t h = reinterpret_cast<const uint16_t*>(raw)[k];
    return dt == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
  };
  const double none = -std::numeric_limits<double>::infinity();
  Tensor top = Tensor::cpu({n}, DType::kF64), first = Tensor::cpu({n}, DType::kF64);
  Tensor sums = Tensor::cpu({2, n}, DType::kF64);  // row 0: sum of exp(x - max); 1: target logit
  double* mx = top.data_as<double>();
  double* arg = first.data_as<double>();
  double* sum = sums.data_as<double>();
  std::vector<int64_t> local_arg(static_cast<size_t>(n), -1);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    float m = 0;
    int64_t a = -1;
    for (int64_t v = 0; v < real; ++v)
      if (const float x = at(i, v); a < 0 || x > m) {
        m = x;
        a = v;
      }
    mx[i] = a < 0 ? none : static_cast<double>(m);
    local_arg[static_cast<size_t>(i)] = a;
  }
  const bool reduce = tensor != nullptr && tensor->size() > 1;
  if (reduce) tensor->all_reduce(top, ReduceOp::kMax);
  // The argmax: the lowest global index holding the max, as the max of minus the index.
  for (int64_t i = 0; i < n; ++i) {
    const int64_t a = local_arg[static_cast<size_t>(i)];
    arg[i] = a >= 0 && static_cast<double>(at(i, a)) == mx[i]
                 ? -static_cast<double>(shard.start + a)
                 : none;
  }
  if (reduce) tensor->all_reduce(first, ReduceOp::kMax);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t v = 0; v < real; ++v) s += std::exp(static_cast<double>(at(i, v)) - mx[i]);
    sum[i] = s;
    const int64_t t = targets[static_cast<size_t>(i)] - shard.start;
    sum[n + i] = t >= 0 && t < real ? static_cast<double>(at(i, t)) : 0.0;
  }
  if (reduce) tensor->all_reduce(sums, ReduceOp::kSum);
  TokenScores out;
  out.logprob.resize(static_cast<size_t>(n));
  out.greedy.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<size_t>(i);
    out.logprob[u] = sum[n + i] - (mx[i] + std::log(sum[i]));
    out.greedy[u] = -arg[i] == static_cast<double>(targets[u]) ? 1 : 0;
  }
  return out;
}

}  // namespace mtnlg
