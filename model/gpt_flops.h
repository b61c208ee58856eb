// The model FLOP count: the one formula the planner (--dry-run), the trainer's metrics
// (tflops_per_device) and the benchmarks (bench/run.sh) report, explained in docs/planning.md
// (Model FLOPs). From Narayanan et al. 2021 (appendix), the count the MT-NLG paper's Table 2 uses.
//
// Per token, one forward pass costs 2 FLOPs (multiply + add) per weight of a GEMM it goes
// through, and attention's two s x s products:
//   each layer    2 h (4h + 2f)      QKV 6h^2, dense 2h^2, MLP 4hf (f: ffn_hidden_size)
//                 + 4 s h            Q K^T and P V over the full s x s square (causal masking
//                                    ignored, as Megatron-LM and PaLM's MFU count it)
//   the LM head   2 h V              V: the padded vocabulary (the GEMM computes every column)
// Backward costs twice the forward (input and weight gradients): 3 passes. Full activation
// recomputation adds one more forward of the layers, not of the head: 4 passes for them.
// With f = 4h, per sample of s tokens and l layers:
//   no recompute   72 s l h^2 (1 + s/(6h) + V/(12 l h))
//   recompute      96 s l h^2 (1 + s/(6h) + V/(16 l h))   (the paper's)
// Not counted: embedding lookups (gathers), LayerNorm, GeLU, softmax, biases, the optimizer.
// Equivalently 6N + 12 l h s per token with N = 12 l h^2 + V h (the GEMM weights), the "6N"
// of scaling-law papers plus attention. Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "model/gpt_config.h"

namespace mtnlg {

double model_flops_per_token(int64_t layers, int64_t hidden, int64_t ffn, int64_t seq,
                             int64_t padded_vocab, bool recompute);

inline double model_flops_per_token(const GPTConfig& c, bool recompute) {
  return model_flops_per_token(c.num_layers, c.hidden, c.ffn, c.seq, c.padded_vocab, recompute);
}

}  // namespace mtnlg
