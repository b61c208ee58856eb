// GPTConfig: the model's shape as the modules need it, derived from a Recipe, plus which slice
// of the model this rank builds (a pipeline stage is a range of layers; the first stage owns the
// embedding, the last the final LayerNorm, LM head and loss).
#pragma once

#include <cstdint>

#include "core/config/recipe.h"
#include "core/fp8_scaling.h"

namespace mtnlg {

struct GPTConfig {
  int64_t num_layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t ffn = 0;
  int64_t seq = 0;
  int64_t max_positions = 0;
  int64_t vocab = 0;         // real vocabulary: logits columns >= vocab are padding
  int64_t padded_vocab = 0;  // rows of the embedding table
  Activation activation = Activation::kGelu;
  double ln_eps = 1e-5;
  double init_std = 0.02;
  double hidden_dropout = 0.0;
  double attention_dropout = 0.0;
  bool activation_checkpointing = false;
  // Tensor parallelism (Megatron-LM's): this rank holds heads/tp attention heads, ffn/tp MLP
  // columns and padded_vocab/tp vocabulary rows; tp_rank picks which.
  int64_t tp_size = 1;
  int64_t tp_rank = 0;
  // Model chunks per pipeline stage (parallel.virtual_pipeline; pipeline_stage uses it).
  int64_t virtual_pipeline = 1;
  // Sequence parallelism (tp > 1): outside the tensor-parallel GEMMs and attention, this rank
  // holds rows [tp_rank * n/tp, (tp_rank + 1) * n/tp) of the n = b * s token rows of [b, s, h]
  // (b-major: for b = 1, s/tp consecutive positions), see model/transformer_layer.h.
  bool sequence_parallel = false;
  // precision: fp8: the linear layers' GEMMs in FP8 (model/fp8_linear.h), the rest in bf16.
  bool fp8 = false;
  Fp8Options fp8_options;

  int64_t head_dim() const { return hidden / heads; }
  int64_t local_heads() const { return heads / tp_size; }
  int64_t local_attention_width() const { return hidden / tp_size; }  // local heads x head_dim
  int64_t local_ffn() const { return ffn / tp_size; }
  int64_t local_vocab() const { return padded_vocab / tp_size; }
  // Token rows this rank holds in the residual stream of a micro-batch of b sequences.
  int64_t local_rows(int64_t b) const { return sequence_parallel ? b * seq / tp_size : b * seq; }
  // The first of them, in the b * s rows of the micro-batch.
  int64_t first_row(int64_t b) const { return sequence_parallel ? tp_rank * local_rows(b) : 0; }
};

// Which part of the model a stage holds: layers [first_layer, last_layer), or with the
// interleaved schedule num_chunks model chunks of as many layers, chunk c being
// [first_layer + c * chunk_stride, last_layer + c * chunk_stride) (Megatron-LM's assignment:
// chunk c of stage r of p is virtual stage c*p + r). The embedding is in chunk 0, the head in the
// last chunk.
struct StageSpec {
  int64_t first_layer = 0;
  int64_t last_layer = 0;
  bool pre_process = true;   // embedding
  bool post_process = true;  // final LayerNorm, tied LM head, loss
  int64_t num_chunks = 1;
  int64_t chunk_stride = 0;

  int64_t chunk_first(int64_t c) const { return first_layer + c * chunk_stride; }
  int64_t chunk_last(int64_t c) const { return last_layer + c * chunk_stride; }
  int64_t layers_per_chunk() const { return last_layer - first_layer; }
  int64_t num_layers() const { return num_chunks * layers_per_chunk(); }
};

GPTConfig gpt_config_from(const Recipe& recipe);
// The whole model as one stage.
StageSpec full_model(const GPTConfig& config);
// Stage `stage` of `pipeline` (an even share of the layers; the recipe checks that they divide),
// in config.virtual_pipeline chunks.
StageSpec pipeline_stage(const GPTConfig& config, int64_t pipeline, int64_t stage);

}  // namespace mtnlg
