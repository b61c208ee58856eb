// The GPT parameter set, registered by name (Megatron-LM's names) with global shapes, the
// tensor-parallel partition dimension, the weight-decay flag and the init rule:
//
//   embedding.word_embeddings.weight              [V_pad, h]  dim 0 (vocab-parallel); tied LM head
//   embedding.position_embeddings.weight          [P, h]      replicated
//   layers.{i}.input_layernorm.{weight,bias}      [h]         no decay
//   layers.{i}.self_attention.query_key_value.weight  [3h, h] dim 0 (column-parallel), rows ordered
//       per head (q_j, k_j, v_j), so a contiguous split keeps whole heads
//   layers.{i}.self_attention.query_key_value.bias    [3h]    dim 0
//   layers.{i}.self_attention.dense.{weight [h, h] dim 1 (row-parallel), bias [h]}
//   layers.{i}.post_attention_layernorm.{weight,bias}
//   layers.{i}.mlp.dense_h_to_4h.{weight [f, h] dim 0, bias [f] dim 0}
//   layers.{i}.mlp.dense_4h_to_h.{weight [h, f] dim 1, bias [h]}
//   final_layernorm.{weight,bias}
//
// Weights are [out, in] (y = x W^T + b). Init: weights normal(0, std); the two output
// projections of each block (dense, dense_4h_to_h) normal(0, std / sqrt(2 * num_layers));
// biases and LayerNorm betas 0; gammas 1.
#pragma once

#include <string>

#include "model/gpt_config.h"
#include "model/param_registry.h"

namespace mtnlg {

void register_gpt_params(ParamRegistry& registry, const GPTConfig& config, const StageSpec& stage);

// Parameter name of layer i, e.g. layer_param(3, "mlp.dense_h_to_4h.weight").
std::string layer_param(int64_t layer, const std::string& suffix);

// Parameters of the whole model (the tied head counted once), without allocating.
int64_t gpt_parameter_count(const GPTConfig& config);

}  // namespace mtnlg
