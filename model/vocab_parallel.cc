#include "model/vocab_parallel.h"

#include <algorithm>
#include <cmath>

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

TokenScores vocab_parallel_token_scores(Backend& be, VocabParallelCEContext& ctx,
                                        const Tensor& logits, const Tensor& targets,
                                        std::span<const int64_t> rows, const VocabShard& shard,
                                        Communicator* tensor) {
  MTNLG_CHECK_EQ(logits.dim(-1), shard.size);
  const int64_t n = logits.numel() / logits.dim(-1), width = shard.size;
  MTNLG_CHECK_EQ(targets.numel(), n);
  MTNLG_CHECK_MSG(ctx.row_max.defined() && ctx.row_max.numel() == n && ctx.stats.numel() == 2 * n,
                  "vocab_parallel_token_scores: statistics for " << n << " rows not allocated");
  be.cross_entropy_shard_max(ctx.row_max, logits, shard.start, shard.vocab);
  all_reduce_max(ctx.row_max, tensor);
  be.cross_entropy_shard_stats(ctx.stats, logits, targets, ctx.row_max, shard.start, shard.vocab);
  all_reduce_sum(ctx.stats, tensor);
  Tensor mx = ctx.row_max, st = ctx.stats, tg = targets;
  if (be.device() != Device::kCPU) {
    mx = Tensor::cpu({n}, DType::kF64);
    st = Tensor::cpu({2, n}, DType::kF64);
    tg = Tensor::cpu(targets.shape(), DType::kI32);
    be.copy(mx, ctx.row_max);
    be.copy(st, ctx.stats);
    be.copy(tg, targets);
  }
  const double* m = mx.data_as<double>();
  const double* sum = st.data_as<double>();
  const int32_t* t = tg.data_as<int32_t>();
  TokenScores out;
  out.logprob.resize(rows.size());
  out.greedy.resize(rows.size());
  std::vector<size_t> candidates;  // the target's logit is the row's max: greedy unless tied below
  for (size_t k = 0; k < rows.size(); ++k) {
    const int64_t r = rows[k];
    MTNLG_CHECK(0 <= r && r < n);
    out.logprob[k] = sum[n + r] - (m[r] + std::log(sum[r]));
    if (sum[n + r] == m[r]) candidates.push_back(k);
  }
  if (candidates.empty()) return out;
  // A lower index holding the same max takes the argmax: look in this rank's columns below the
  // target, then agree over the group.
  const int64_t real = std::clamp<int64_t>(shard.vocab - shard.start, 0, width);
  Tensor tied = Tensor::cpu({static_cast<int64_t>(candidates.size())}, DType::kF64);
  Tensor row = Tensor::cpu({width}, DType::kF32);
  for (size_t c = 0; c < candidates.size(); ++c) {
    const int64_t r = rows[candidates[c]];
    const int64_t below = std::clamp<int64_t>(t[r] - shard.start, 0, real);
    bool found = false;
    if (below > 0) {
      Tensor dst = row.view({1, width});
      be.copy(dst, logits.view({n, width}).slice(r, r + 1));  // widened to f32 on the way
      const float* x = row.data_as<float>();
      for (int64_t j = 0; j < below && !found; ++j) found = static_cast<double>(x[j]) == m[r];
    }
    tied.data_as<double>()[c] = found ? 1.0 : 0.0;
  }
  if (tensor != nullptr && tensor->size() > 1) tensor->all_reduce(tied, ReduceOp::kMax);
  for (size_t k = 0; k < rows.size(); ++k) out.greedy[k] = 0;
  for (size_t c = 0; c < candidates.size(); ++c)
    out.greedy[candidates[c]] = tied.data_as<double>()[c] == 0.0 ? 1 : 0;
  return out;
}

}  // namespace mtnlg
