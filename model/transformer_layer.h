// One pre-LayerNorm GPT block with explicit forward and backward:
//
//   h1  = x  + dropout(dense(attention(qkv(ln1(x)))))
//   out = h1 + dropout(fc2(act(fc1(ln2(h1)))))
//
// Shapes (b micro-batch, s sequence, h hidden, f ffn, a heads): see LayerActivations.
// backward() runs the forward's steps in exact reverse order.
//
// Tensor parallelism (Megatron-LM's): qkv and fc1 are column-parallel (input replicated, its
// gradient all-reduced: copy_to_tensor_region), attention runs over this rank's a/tp heads, and
// dense and fc2 are row-parallel (partial outputs all-reduced: reduce_from_tensor_region, the
// replicated bias added after the reduction). Shapes below are local: h/tp = a/tp heads x hd.
// The attention-probs dropout element index uses the GLOBAL head, so any tp draws the same masks.
//
// Sequence parallelism (config.sequence_parallel; Korthikanti et al. 2022): x, out, h1 and both
// LayerNorms' outputs and statistics hold only this rank's n/tp token rows (GPTConfig::local_rows,
// n = b*s): [n/tp, h]. The LayerNorm output is all-gathered into [b, s, h] before each
// column-parallel GEMM (and again in backward, for the weight gradient: the gathered copy is not
// kept), and each row-parallel GEMM's partial output is reduce-scattered to the local rows instead
// of all-reduced, then the bias, dropout and residual add run on those rows. Backward mirrors it:
// the output gradient is all-gathered before the row-parallel GEMM's backward (so its bias
// gradient, summed over every row, is complete on each rank), the column-parallel input
// gradient reduce-scattered. Dropout masks are those of the same rows without sequence
// parallelism (the stream's offset places the local rows). The LayerNorms' weight and bias
// gradients, from local rows only, are summed over the tensor group in each backward, so every
// rank adds the same complete gradient.
#pragma once

#include "core/backend.h"
#include "model/dropout_streams.h"
#include "model/fp8_linear.h"
#include "model/gpt_config.h"
#include "model/param_registry.h"
#include "parallel/communicator.h"

namespace mtnlg {

// What forward saves for backward. With activation checkpointing only the input is kept per
// layer and the rest lives in one shared buffer refilled by recomputation.
struct LayerActivations {
  Tensor ln1_out, ln1_mean, ln1_rstd;  // [b, s, h], [b*s], [b*s] (sequence parallel: [n/tp, h],
                                       // [n/tp], as h1 and ln2's)
  Tensor qkv;                          // [b, s, 3h/tp], per head (q, k, v)
  Tensor attn_stats;  // [b, a/tp, s] each query row's softmax log-sum-exp (fp32 under bf16)
  Tensor attn_out;    // [b, s, h/tp] attention output before the dense projection
  Tensor h1;          // [b, s, h] residual stream after attention
  Tensor ln2_out, ln2_mean, ln2_rstd;  // [b, s, h], [b*s], [b*s]
  Tensor fc1_out;                      // [b, s, f/tp] before the activation
  Tensor act_out;                      // [b, s, f/tp]

  static LayerActivations allocate(Backend& be, const GPTConfig& c, int64_t b, DType dtype);
};

// Backward-only buffers, shared by all layers of a stage.
struct LayerScratch {
  Tensor dh;     // [b, s, h]
  Tensor dln;    // [b, s, h]
  Tensor dattn;  // [b, s, h/tp]
  Tensor dqkv;   // [b, s, 3h/tp]
  Tensor dact;   // [b, s, f/tp]

  static LayerScratch allocate(Backend& be, const GPTConfig& c, int64_t b, DType dtype);
};

// Sequence parallelism's full-size buffers, shared by all layers of a stage (undefined without
// it): gathered [b, s, h] (a LayerNorm output, or an output gradient, all-gathered), partial
// [b, s, h] (a GEMM's partial sums before the reduce-scatter), ln_grads [2h] in the gradients'
// dtype (one LayerNorm's weight and bias gradient of this micro-batch, summed over the group).
struct SequenceParallelBuffers {
  Tensor gathered, partial, ln_grads;

  static SequenceParallelBuffers allocate(Backend& be, const GPTConfig& c, int64_t b, DType dtype,
                                          DType grad_dtype);
};

// LayerNorm backward under sequence parallelism: din += dL/din of this rank's rows; this
// micro-batch's weight and bias gradients from those rows (into ln_grads [2h]) summed over the
// tensor group, then added to w.grad and bias.grad (every rank adds the same sums, so the
// replicas stay equal).
void layernorm_backward_sequence_parallel(Backend& be, Tensor& din, Param& w, Param& bias,
                                          const Tensor& dout, const Tensor& in, const Tensor& mean,
                                          const Tensor& rstd, Tensor& ln_grads,
                                          Communicator* tensor);

class TransformerLayer {
 public:
  // Looks up layer `index`'s parameters in `registry` (they must be registered). tensor: the
  // tensor-parallel group (borrowed; null or one rank without tensor parallelism).
  // fp8: the stage's FP8 state (precision: fp8; borrowed): the four linear layers' GEMMs run
  // through it (model/fp8_linear.h); null: in the model's dtype.
  TransformerLayer(const GPTConfig& config, int64_t index, ParamRegistry& registry,
                   Communicator* tensor = nullptr, Fp8Linears* fp8 = nullptr);

  // out: [b, s, h] (must not alias x); x: [b, s, h] (sequence parallel: [n/tp, h] both, and sp
  // the stage's buffers).
  void forward(Backend& be, LayerActivations& acts, Tensor out, const Tensor& x, uint64_t seed,
               uint64_t micro_batch, SequenceParallelBuffers* sp = nullptr) const;
  // dres: on entry dL/d(out), on exit dL/dx (updated in place). Parameter grads accumulate.
  void backward(Backend& be, LayerScratch& scratch, Tensor dres, const LayerActivations& acts,
                const Tensor& x, uint64_t seed, uint64_t micro_batch,
                SequenceParallelBuffers* sp = nullptr);

  int64_t index() const { return index_; }
  // The sequence length of the micro-batches that follow (GPTStage::set_sequence_length).
  void set_sequence_length(int64_t s) { c_.seq = s; }
  // Dropout probabilities in effect (0 during evaluation).
  void set_dropout(double hidden, double attention) {
    c_.hidden_dropout = hidden;
    c_.attention_dropout = attention;
  }

 private:
  // Attention over the local heads; with tp > 1, one call per sequence so that the dropout
  // stream's offset can place the local heads at their global index.
  void attention_forward(Backend& be, LayerActivations& a, RngStream rng) const;
  void attention_backward(Backend& be, LayerScratch& s, const LayerActivations& a,
                          RngStream rng) const;
  // A dropout stream of this layer, placed at this rank's first token row.
  RngStream hidden_stream(uint64_t seed, uint64_t micro_batch, DropoutSite site, int64_t b) const;

  GPTConfig c_;
  int64_t index_;
  Communicator* tensor_;
  Fp8Linears* fp8_;
  Param *ln1_w_, *ln1_b_, *qkv_w_, *qkv_b_, *dense_w_, *dense_b_;
  Param *ln2_w_, *ln2_b_, *fc1_w_, *fc1_b_, *fc2_w_, *fc2_b_;
};

}  // namespace mtnlg
