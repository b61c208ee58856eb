// Vocab-parallel embedding and cross entropy (Megatron-LM's VocabParallelEmbedding and
// vocab_parallel_cross_entropy): tensor-parallel rank r holds rows [start, start + V_pad/tp) of
// the word embeddings (start = r * V_pad/tp), so the tied LM head gives it logits columns
// [start, start + V_pad/tp). The full logits are never gathered.
//
// The local math is in small host functions apart from the all-reduces (parallel/mappings.h), so
// it is testable without a group. Host loops over CPU tensors (f32 or f64): the CPU backend's
// tensors are host memory; a CUDA version comes with NCCL. Not thread-safe.
#pragma once

#include <cstdint>

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
// wpe[t, :] when add_positions (exactly one rank adds them); then summed over the tensor group.
// out [b, s, h]; tokens i32 [b, s]; wte_local [V_pad/tp, h]; wpe [P, h].
void vocab_parallel_embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte_local,
                                      const Tensor& wpe, const VocabShard& shard,
                                      bool add_positions, Communicator* tensor);
// dwte_local[tokens - start] += dout for the tokens this rank holds; dwpe[t] += sum_b dout[b, t]
// (dout is replicated, so the replicated dwpe comes out the same on every rank).
void vocab_parallel_embedding_backward(Tensor& dwte_local, Tensor& dwpe, const Tensor& dout,
                                       const Tensor& tokens, const VocabShard& shard);

// What the cross-entropy forward saves for backward: per-row global max and sum-exp (f64 [n]).
struct VocabParallelCEContext {
  Tensor row_max, row_sum;
};

// Sum over rows of -log softmax(logits)[target] with logits split by columns over the group:
// local logits [n, V_pad/tp], targets i32 [n] in [0, vocab). Collective (two all-reduces).
double vocab_parallel_cross_entropy_forward(VocabParallelCEContext& ctx, const Tensor& logits,
                                            const Tensor& targets, const VocabShard& shard,
                                            Communicator* tensor);
// dlogits = grad_scale * (softmax - onehot) on the local columns; padding columns 0. dlogits may
// alias logits. Local (no communication).
void vocab_parallel_cross_entropy_backward(Tensor& dlogits, const VocabParallelCEContext& ctx,
                                           const Tensor& logits, const Tensor& targets,
                                           const VocabShard& shard, double grad_scale);

// The local steps, exposed for tests. row_max [n]: max over this rank's real columns (-inf when
// it holds none). stats [2n]: sum exp(x - row_max) over the real columns, then the target logit
// where this rank holds the target (else 0).
void vocab_parallel_ce_local_max(Tensor& row_max, const Tensor& logits, const VocabShard& shard);
void vocab_parallel_ce_local_stats(Tensor& stats, const Tensor& logits, const Tensor& targets,
                                   const Tensor& row_max, const VocabShard& shard);

}  // namespace mtnlg
