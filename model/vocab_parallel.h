// Vocab-parallel embedding and cross entropy (Megatron-LM's VocabParallelEmbedding and
// vocab_parallel_cross_entropy): tensor-parallel rank r holds rows [start, start + V_pad/tp) of
// the word embeddings (start = r * V_pad/tp), so the tied LM head gives it logits columns
// [start, start + V_pad/tp). The full logits are never gathered.
//
// Device-agnostic: the local math is the backend's (Backend::embedding_shard_* and
// cross_entropy_shard_*), the reductions go through the tensor group's communicator on the same
// device (parallel/mappings.h); only the loss's per-row statistics (24 bytes a row) come to the
// host, to add the loss up. Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/backend.h"
#include "parallel/communicator.h"

namespace mtnlg {

// Which slice of the (padded) vocabulary a rank holds.
struct VocabShard {
  int64_t start = 0;  // first global row / logits column held
  int64_t size = 0;   // rows held: V_pad / tp
  int64_t vocab = 0;  // real vocabulary: global columns >= vocab are padding
};

// out[b, t, :] = wte_local[tokens[b, t] - start] if this rank holds the token, else 0, plus
// wpe[t, :] when add_positions (exactly one rank adds them); then summed over the tensor group
// (no group: this rank's part alone). out [b, s, h]; tokens i32 [b, s]; wte_local [V_pad/tp, h];
// wpe [P, h].
void vocab_parallel_embedding_forward(Backend& be, Tensor& out, const Tensor& tokens,
                                      const Tensor& wte_local, const Tensor& wpe,
                                      const VocabShard& shard, bool add_positions,
                                      Communicator* tensor);
// dwte_local[tokens - start] += dout for the tokens this rank holds; dwpe[t] += sum_b dout[b, t]
// (dout is replicated, so the replicated dwpe comes out the same on every rank).
void vocab_parallel_embedding_backward(Backend& be, Tensor& dwte_local, Tensor& dwpe,
                                       const Tensor& dout, const Tensor& tokens,
                                       const VocabShard& shard);

// What the cross-entropy forward keeps for backward, on the backend's device (f64): row_max [n],
// the global max of each row; stats [2, n], row 0 the global sum of exp(x - row_max), row 1 the
// target logits. Allocated with the micro-batch's activations (vocab_parallel_ce_allocate), so
// the planner counts them (3 doubles a row).
struct VocabParallelCEContext {
  Tensor row_max, stats;
};
VocabParallelCEContext vocab_parallel_ce_allocate(Backend& be, int64_t rows);

// Sum over rows of -log softmax(logits)[target] with logits split by columns over the group:
// local logits [n, V_pad/tp], targets i32 [n] in [0, vocab). Collective (two all-reduces).
double vocab_parallel_cross_entropy_forward(Backend& be, VocabParallelCEContext& ctx,
                                            const Tensor& logits, const Tensor& targets,
                                            const VocabShard& shard, Communicator* tensor);
// dlogits = grad_scale * (softmax - onehot) on the local columns; padding columns 0. dlogits may
// alias logits. Local (no communication).
void vocab_parallel_cross_entropy_backward(Backend& be, Tensor& dlogits,
                                           const VocabParallelCEContext& ctx, const Tensor& logits,
                                           const Tensor& targets, const VocabShard& shard,
                                           double grad_scale);

// Scoring (evaluation's log-likelihoods), on the backend's device: for each row r of `rows` of
// the local logits [n, V_pad/tp] (any dtype) with its target targets[r] (i32 [n] on the same
// device), log softmax(row)[target] over the real vocabulary and whether the target is the row's
// argmax (the lowest index among equal maxima, as one device's argmax over the whole row). The
// cross entropy's statistics in double (ctx, allocated for n rows: the global row max and sum of
// exp(x - max) and the target logit, reduced over the tensor group) come to the host, 3 doubles
// a row; only a row whose target logit equals its max has its logits read back, to look for an
// equal one at a lower index. Collective over the tensor group (null: one rank).
struct TokenScores {
  std::vector<double> logprob;
  std::vector<uint8_t> greedy;
};
TokenScores vocab_parallel_token_scores(Backend& be, VocabParallelCEContext& ctx,
                                        const Tensor& logits, const Tensor& targets,
                                        std::span<const int64_t> rows, const VocabShard& shard,
                                        Communicator* tensor);

}  // namespace mtnlg
