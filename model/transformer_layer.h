// One pre-LayerNorm GPT block with explicit forward and backward:
//
//   h1  = x  + dropout(dense(attention(qkv(ln1(x)))))
//   out = h1 + dropout(fc2(act(fc1(ln2(h1)))))
//
// Shapes (b micro-batch, s sequence, h hidden, f ffn, a heads): see LayerActivations.
// backward() runs the forward's steps in exact reverse order.
#pragma once

#include "core/backend.h"
#include "model/gpt_config.h"
#include "model/param_registry.h"

namespace mtnlg {

// What forward saves for backward. With activation checkpointing only the input is kept per
// layer and the rest lives in one shared buffer refilled by recomputation.
struct LayerActivations {
  Tensor ln1_out, ln1_mean, ln1_rstd;  // [b, s, h], [b*s], [b*s]
  Tensor qkv;                          // [b, s, 3h], per head (q, k, v)
  Tensor probs;                        // [b, a, s, s]
  Tensor attn_out;                     // [b, s, h] attention output before the dense projection
  Tensor h1;                           // [b, s, h] residual stream after attention
  Tensor ln2_out, ln2_mean, ln2_rstd;  // [b, s, h], [b*s], [b*s]
  Tensor fc1_out;                      // [b, s, f] before the activation
  Tensor act_out;                      // [b, s, f]

  static LayerActivations allocate(Backend& be, const GPTConfig& c, int64_t b, DType dtype);
};

// Backward-only buffers, shared by all layers of a stage.
struct LayerScratch {
  Tensor dh;     // [b, s, h]
  Tensor dln;    // [b, s, h]
  Tensor dattn;  // [b, s, h]
  Tensor dqkv;   // [b, s, 3h]
  Tensor dact;   // [b, s, f]

  static LayerScratch allocate(Backend& be, const GPTConfig& c, int64_t b, DType dtype);
};

class TransformerLayer {
 public:
  // Looks up layer `index`'s parameters in `registry` (they must be registered).
  TransformerLayer(const GPTConfig& config, int64_t index, ParamRegistry& registry);

  // out: [b, s, h] (must not alias x); x: [b, s, h].
  void forward(Backend& be, LayerActivations& acts, Tensor out, const Tensor& x, uint64_t seed,
               uint64_t micro_batch) const;
  // dres: on entry dL/d(out), on exit dL/dx (updated in place). Parameter grads accumulate.
  void backward(Backend& be, LayerScratch& scratch, Tensor dres, const LayerActivations& acts,
                const Tensor& x, uint64_t seed, uint64_t micro_batch);

  int64_t index() const { return index_; }
  // Dropout probabilities in effect (0 during evaluation).
  void set_dropout(double hidden, double attention) {
    c_.hidden_dropout = hidden;
    c_.attention_dropout = attention;
  }

 private:
  GPTConfig c_;
  int64_t index_;
  Param *ln1_w_, *ln1_b_, *qkv_w_, *qkv_b_, *dense_w_, *dense_b_;
  Param *ln2_w_, *ln2_b_, *fc1_w_, *fc1_b_, *fc2_w_, *fc2_b_;
};

}  // namespace mtnlg
