// The model FLOP count the benchmarks report (bench/torch_train.py computes the same numbers).
//
//   FLOPs per token = 6 * N + 12 * L * h * s
//
// N counts every parameter that takes part in a matmul-or-elementwise product per token: all
// non-embedding parameters (the L blocks' QKV, dense, MLP weights and biases and both
// LayerNorms, plus the final LayerNorm) plus the tied LM head's V_pad * h (the head matmul is
// computed over the padded vocabulary, so V_pad, not V). The word and position embedding
// lookups are not counted (they are gathers). 6 = 2 (multiply-add) * 3 (forward, input grad,
// weight grad). 12 * L * h * s is attention's QK^T and PV over the full s x s square (2 matmuls
// * 2 FLOPs * 3 passes * h * s per token per layer), the convention of Megatron-LM and PaLM's
// MFU, which ignores causal masking. Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "model/gpt_config.h"
#include "model/param_registry.h"

namespace mtnlg::bench {

struct ModelFlops {
  int64_t non_embedding_params = 0;  // parameters not named "embedding.*"
  int64_t head_params = 0;           // V_pad * h of the tied LM head
  int64_t n = 0;                     // non_embedding_params + head_params
  double attention_per_token = 0.0;  // 12 * L * h * s
  double per_token = 0.0;            // 6 * n + attention_per_token
};

// Counts from the registry of a full-model stage.
ModelFlops model_flops(const GPTConfig& config, const ParamRegistry& params);

}  // namespace mtnlg::bench
