// RowForward: the dense path of a whole GPT model over rows of tokens, for inference on the CPU
// (the decoder's cached generation, the scorer's packed requests). It embeds tokens at given
// positions, runs each layer's LayerNorms, GEMMs, biases, GeLU and residual adds through the
// model's Backend (the kernels training uses), with the attention between them left to the
// caller (a key/value cache, or packed sequences), and applies the final LayerNorm and the tied
// head to contiguous rows, kHeadRows at a time (one row at a time, each row would read the whole
// embedding matrix).
//
// Needs a whole model in one stage at tensor size 1 (checked), on any backend and in any dtype:
// its scratch is the backend's, in the model's dtype. x(), embed() and head() read and write host
// floats, so they need an f32 model on the CPU (checked; GPTScorer's packed rows);
// embed_consecutive() and head_rows() work on any device. Borrows the model (it must outlive
// this and not change); owns scratch for max_rows rows. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "model/gpt_stage.h"

namespace mtnlg {

class RowForward {
 public:
  static constexpr int64_t kHeadRows = 128;

  // Throws invalid_argument if the model is not a whole model at tensor size 1.
  RowForward(GPTStage& model, int64_t max_rows);

  // Whether the host-float accessors (x(), embed(), head()) apply: an f32 model on the CPU.
  bool on_host() const { return on_host_; }

  const GPTConfig& config() const { return model_.config(); }
  Backend& backend() { return backend_; }
  int64_t max_rows() const { return max_rows_; }
  // The residual stream: max_rows rows of config().hidden floats (on_host() only).
  float* x();

  // Row `row` of x() := the token's embedding plus the position's. Throws invalid_argument
  // naming `what` for a token outside [0, vocab) or a position past the model's.
  void embed(int64_t row, int32_t token, int64_t position, const char* what);
  // Rows [0, n) := the tokens' embeddings at positions [first_position, first_position + n), on
  // the backend (any device). Errors as embed().
  void embed_consecutive(std::span<const int32_t> tokens, int64_t first_position, const char* what);

  // The attention of rows [0, n): reads their qkv rows ([n, 3 hidden]: per head j the columns
  // q_j, k_j, v_j, head_dim each) and writes their context rows (out: [n, hidden], heads side by
  // side).
  using Attend = std::function<void(int64_t layer, const Tensor& qkv, Tensor& out)>;
  // One transformer layer over rows [0, n) of x().
  void layer(int64_t layer, int64_t n, const Attend& attend);

  // The logits of `n` contiguous rows of hidden floats (x() rows, or a gather of them), kHeadRows
  // at a time: `each(first, m, logits)` per chunk, rows [first, first + m), row i's logits at
  // logits + (i - first) * padded_vocab() (the first config().vocab of them are the vocabulary's).
  using EachChunk = std::function<void(int64_t first, int64_t m, const float* logits)>;
  void head(const float* rows, int64_t n, const EachChunk& each);
  // The same for rows [first, first + n) of the residual stream, on any device: each chunk's
  // logits come to the host as floats.
  void head_rows(int64_t first, int64_t n, const EachChunk& each);
  int64_t padded_vocab() const { return model_.config().padded_vocab; }

 private:
  GPTStage& model_;
  Backend& backend_;
  int64_t max_rows_;
  Tensor x_, ln_, mean_, rstd_, qkv_, attn_, proj_, fc_, act_;
  Tensor head_in_, logits_;  // [kHeadRows, hidden], [kHeadRows, padded vocab]
  bool on_host_ = false;
  Tensor tokens_;       // i32 [1, max_rows] on the backend (embed_consecutive)
  Tensor host_logits_;  // f32 [kHeadRows, padded vocab] on the host (head_rows off the host)
};

}  // namespace mtnlg
