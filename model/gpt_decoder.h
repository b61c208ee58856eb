// GPTDecoder: incremental inference over a whole GPT model (one stage, tensor parallel size 1)
// with a key/value cache, for text generation (mtnlg-generate).
//
// The cache holds every layer's keys and values of the positions seen so far, so feeding a
// prompt costs one forward over its tokens (prefill) and each further token one forward of a
// single row: its query attends to the cached keys. The dense work (LayerNorm, the four GEMMs
// of each layer with their biases, GeLU, the tied head) goes through the model's Backend, the
// kernels training uses, on its device and in its dtype. The attention over the cache:
//   host      an f32 model on the CPU: keys and values cached per head on the host, each new
//             row's query attending to them (O(positions) a token);
//   device    any other model (a GPU, bf16, fp16), or asked for: every row's q, k and v cached
//             on the backend's device, and the backend's causal attention kernel (the training
//             forward's) run over the whole cached sequence, its last rows kept (O(positions^2)
//             a token in attention; the GEMMs still run on the new rows only).
// Numerics: the logits of position p equal those a full forward over positions [0, p] computes,
// to the dtype's rounding (model_gpt_decoder_test).
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

enum class DecoderAttention { kAuto, kHost, kDevice };

class GPTDecoder {
 public:
  // Throws invalid_argument if the model is not a whole model at tensor size 1, or kHost is asked
  // of a model that is not f32 on the CPU. max_tokens: the cache's length (at most the model's
  // max_position_embeddings; checked). kAuto: host where it applies, else device.
  GPTDecoder(GPTStage& model, int64_t max_tokens,
             DecoderAttention attention = DecoderAttention::kAuto);

  bool device_attention() const { return device_; }

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
  void attend_device(int64_t layer, int64_t n, const Tensor& qkv, Tensor& out);

  RowForward rows_;
  int64_t max_tokens_;
  int64_t position_ = 0;
  bool device_ = false;
  std::vector<Tensor> keys_, values_;  // host: per layer [heads, max_tokens, head_dim]
  std::vector<Tensor> qkv_cache_;      // device: per layer [max_tokens, 3 hidden]
  Tensor attn_all_, stats_;            // device: [max_tokens, hidden], [heads * max_tokens]
};

}  // namespace mtnlg
