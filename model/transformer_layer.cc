#include "model/transformer_layer.h"

#include "model/dropout_streams.h"
#include "model/gpt_params.h"
#include "model/linear.h"
#include "parallel/mappings.h"

namespace mtnlg {

LayerActivations LayerActivations::allocate(Backend& be, const GPTConfig& c, int64_t b, DType dt) {
  const int64_t s = c.seq, h = c.hidden, f = c.local_ffn(), a = c.local_heads();
  const int64_t ha = c.local_attention_width();
  LayerActivations x;
  x.ln1_out = be.alloc({b, s, h}, dt);
  x.ln1_mean = be.alloc({b * s}, acc_dtype(dt));  // LayerNorm statistics in fp32 under bf16
  x.ln1_rstd = be.alloc({b * s}, acc_dtype(dt));
  x.qkv = be.alloc({b, s, 3 * ha}, dt);
  x.probs = be.alloc({b, a, s, s}, dt);
  x.attn_out = be.alloc({b, s, ha}, dt);
  x.h1 = be.alloc({b, s, h}, dt);
  x.ln2_out = be.alloc({b, s, h}, dt);
  x.ln2_mean = be.alloc({b * s}, acc_dtype(dt));
  x.ln2_rstd = be.alloc({b * s}, acc_dtype(dt));
  x.fc1_out = be.alloc({b, s, f}, dt);
  x.act_out = be.alloc({b, s, f}, dt);
  return x;
}

LayerScratch LayerScratch::allocate(Backend& be, const GPTConfig& c, int64_t b, DType dt) {
  const int64_t s = c.seq, h = c.hidden, f = c.local_ffn(), ha = c.local_attention_width();
  return LayerScratch{be.alloc({b, s, h}, dt), be.alloc({b, s, h}, dt), be.alloc({b, s, ha}, dt),
                      be.alloc({b, s, 3 * ha}, dt), be.alloc({b, s, f}, dt)};
}

TransformerLayer::TransformerLayer(const GPTConfig& config, int64_t index, ParamRegistry& reg,
                                   Communicator* tensor)
    : c_(config), index_(index), tensor_(tensor) {
  MTNLG_CHECK_EQ(tensor_ == nullptr ? int64_t{1} : int64_t{tensor_->size()}, c_.tp_size);
  auto p = [&](const char* suffix) { return &reg.get(layer_param(index, suffix)); };
  ln1_w_ = p("input_layernorm.weight");
  ln1_b_ = p("input_layernorm.bias");
  qkv_w_ = p("self_attention.query_key_value.weight");
  qkv_b_ = p("self_attention.query_key_value.bias");
  dense_w_ = p("self_attention.dense.weight");
  dense_b_ = p("self_attention.dense.bias");
  ln2_w_ = p("post_attention_layernorm.weight");
  ln2_b_ = p("post_attention_layernorm.bias");
  fc1_w_ = p("mlp.dense_h_to_4h.weight");
  fc1_b_ = p("mlp.dense_h_to_4h.bias");
  fc2_w_ = p("mlp.dense_4h_to_h.weight");
  fc2_b_ = p("mlp.dense_4h_to_h.bias");
}

void TransformerLayer::attention_forward(Backend& be, LayerActivations& a, RngStream rng) const {
  const int64_t heads = c_.local_heads();
  if (c_.tp_size == 1 || c_.attention_dropout <= 0) {
    be.attention_forward(a.attn_out, a.probs, a.qkv, heads, c_.attention_dropout, rng);
    return;
  }
  // Local element ((0 * a/tp + h) * s + i) * s + j of sequence n sits at global
  // ((n * a + tp_rank * a/tp + h) * s + i) * s + j: a constant offset per sequence.
  const int64_t b = a.qkv.dim(0), s = c_.seq;
  for (int64_t n = 0; n < b; ++n) {
    Tensor out = a.attn_out.slice(n, n + 1), probs = a.probs.slice(n, n + 1);
    RngStream r = rng;
    r.offset += static_cast<uint64_t>((n * c_.heads + c_.tp_rank * heads) * s * s);
    be.attention_forward(out, probs, a.qkv.slice(n, n + 1), heads, c_.attention_dropout, r);
  }
}

void TransformerLayer::attention_backward(Backend& be, LayerScratch& sc, const LayerActivations& a,
                                          RngStream rng) const {
  const int64_t heads = c_.local_heads();
  if (c_.tp_size == 1 || c_.attention_dropout <= 0) {
    be.attention_backward(sc.dqkv, sc.dattn, a.qkv, a.probs, heads, c_.attention_dropout, rng);
    return;
  }
  const int64_t b = a.qkv.dim(0), s = c_.seq;
  for (int64_t n = 0; n < b; ++n) {
    Tensor dqkv = sc.dqkv.slice(n, n + 1);
    RngStream r = rng;
    r.offset += static_cast<uint64_t>((n * c_.heads + c_.tp_rank * heads) * s * s);
    be.attention_backward(dqkv, sc.dattn.slice(n, n + 1), a.qkv.slice(n, n + 1),
                          a.probs.slice(n, n + 1), heads, c_.attention_dropout, r);
  }
}

void TransformerLayer::forward(Backend& be, LayerActivations& a, Tensor out, const Tensor& x,
                               uint64_t seed, uint64_t mb) const {
  const auto rng = [&](DropoutSite site) { return layer_dropout_stream(seed, mb, index_, site); };
  // Attention sub-block; `out` doubles as the buffer of the projected attention output.
  be.layernorm_forward(a.ln1_out, a.ln1_mean, a.ln1_rstd, x, ln1_w_->value, ln1_b_->value,
                       c_.ln_eps);
  linear_forward(be, a.qkv, a.ln1_out, *qkv_w_, *qkv_b_);  // column-parallel
  attention_forward(be, a, rng(DropoutSite::kAttentionProbs));
  row_parallel_linear_forward(be, out, a.attn_out, *dense_w_, *dense_b_, tensor_);
  if (c_.hidden_dropout > 0)
    be.dropout_forward(out, out, c_.hidden_dropout, rng(DropoutSite::kAttentionOutput));
  be.add(a.h1, x, out);
  // MLP sub-block.
  be.layernorm_forward(a.ln2_out, a.ln2_mean, a.ln2_rstd, a.h1, ln2_w_->value, ln2_b_->value,
                       c_.ln_eps);
  linear_forward(be, a.fc1_out, a.ln2_out, *fc1_w_, *fc1_b_);  // column-parallel
  be.gelu_forward(a.act_out, a.fc1_out, c_.activation);
  row_parallel_linear_forward(be, out, a.act_out, *fc2_w_, *fc2_b_, tensor_);
  if (c_.hidden_dropout > 0)
    be.dropout_forward(out, out, c_.hidden_dropout, rng(DropoutSite::kMlpOutput));
  be.add(out, out, a.h1);
}

void TransformerLayer::backward(Backend& be, LayerScratch& s, Tensor dres,
                                const LayerActivations& a, const Tensor& x, uint64_t seed,
                                uint64_t mb) {
  const auto rng = [&](DropoutSite site) { return layer_dropout_stream(seed, mb, index_, site); };
  // MLP sub-block, reversed. dres holds dL/d(out), which is also the skip path's dL/d(h1).
  if (c_.hidden_dropout > 0) {
    be.dropout_backward(s.dh, dres, c_.hidden_dropout, rng(DropoutSite::kMlpOutput));
  } else {
    be.copy(s.dh, dres);
  }
  linear_backward(be, s.dact, s.dh, a.act_out, *fc2_w_, *fc2_b_);
  be.gelu_backward(s.dact, s.dact, a.fc1_out, c_.activation);
  linear_backward(be, s.dln, s.dact, a.ln2_out, *fc1_w_, *fc1_b_);
  copy_to_tensor_region_backward(be, s.dln, tensor_);
  be.layernorm_backward(dres, ln2_w_->grad, ln2_b_->grad, s.dln, a.h1, ln2_w_->value, a.ln2_mean,
                        a.ln2_rstd);
  // Attention sub-block, reversed. dres now holds dL/d(h1) = the skip path's dL/dx.
  if (c_.hidden_dropout > 0) {
    be.dropout_backward(s.dh, dres, c_.hidden_dropout, rng(DropoutSite::kAttentionOutput));
  } else {
    be.copy(s.dh, dres);
  }
  linear_backward(be, s.dattn, s.dh, a.attn_out, *dense_w_, *dense_b_);
  attention_backward(be, s, a, rng(DropoutSite::kAttentionProbs));
  linear_backward(be, s.dln, s.dqkv, a.ln1_out, *qkv_w_, *qkv_b_);
  copy_to_tensor_region_backward(be, s.dln, tensor_);
  be.layernorm_backward(dres, ln1_w_->grad, ln1_b_->grad, s.dln, x, ln1_w_->value, a.ln1_mean,
                        a.ln1_rstd);
}

}  // namespace mtnlg
