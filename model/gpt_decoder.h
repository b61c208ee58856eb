// GPTDecoder: incremental inference over a whole GPT model (one stage, tensor parallel size 1)
// with a key/value cache, for text generation (mtnlg-generate).
//
// The cache holds every layer's keys and values of the positions seen so far, so feeding a
// prompt costs one forward over its tokens (prefill) and each further token one forward of a
// single row: its query attends to the cached keys. The dense work (LayerNorm, the four GEMMs
// of each layer with their biases, GeLU, the tied head) goes through the model's Backend, the
// kernels training uses; embedding lookup and the cached attention run here on host memory, so
// the decoder needs a CPU backend and an f32 model (checked). Numerics: the logits of position p
// equal those a full forward over positions [0, p] computes, to float32 rounding
// (model_gpt_decoder_test).
//
// Ownership: borrows the model (it must outlive the decoder and not change while decoding);
// owns the cache. Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/gpt_stage.h"
#include "model/row_forward.h"

namespace mtnlg {

class GPTDecoder {
 public:
  // Throws invalid_argument if the model is not a whole f32 model on the CPU at tensor size 1.
  // max_tokens: the cache's length (at most the model's max_position_embeddings; checked).
  GPTDecoder(GPTStage& model, int64_t max_tokens);

  int64_t position() const { return position_; }  // tokens fed so far
  int64_t max_tokens() const { return max_tokens_; }
  int64_t vocab() const { return rows_.config().vocab; }

  // Empties the cache (a new sequence starts at position 0).
  void reset() { position_ = 0; }

  // Feeds `tokens` at positions [position(), position() + n) and returns the logits of the last
  // one: `vocab()` values (the padded vocabulary's extra columns dropped). Throws
  // invalid_argument naming --max-new-tokens when the cache would overflow, and for an id
  // outside [0, vocab).
  std::vector<float> feed(std::span<const int32_t> tokens);
  // As feed, but the logits of rows [first_row, n) of the fed tokens, row after row (scoring a
  // continuation: each row predicts the token after it).
  std::vector<float> feed_rows(std::span<const int32_t> tokens, int64_t first_row);

 private:
  void embed_and_run(std::span<const int32_t> tokens);  // rows [0, n) through every layer
  void attend(int64_t layer, int64_t n, const float* qkv, float* out);  // the cached attention

  RowForward rows_;
  int64_t max_tokens_;
  int64_t position_ = 0;
  std::vector<Tensor> keys_, values_;  // per layer: [heads, max_tokens, head_dim]
};

}  // namespace mtnlg
