#include "model/transformer_layer.h"

#include "model/dropout_streams.h"
#include "model/gpt_params.h"
#include "model/linear.h"
#include "parallel/mappings.h"

namespace mtnlg {

namespace {

// A tensor of `width` columns over this rank's token rows: [b, s, width], or [n/tp, width] under
// sequence parallelism.
Shape rows_shape(const GPTConfig& c, int64_t b, int64_t width) {
  if (c.sequence_parallel) return {c.local_rows(b), width};
  return {b, c.seq, width};
}

}  // namespace

LayerActivations LayerActivations::allocate(Backend& be, const GPTConfig& c, int64_t b, DType dt) {
  const int64_t s = c.seq, h = c.hidden, f = c.local_ffn(), a = c.local_heads();
  const int64_t ha = c.local_attention_width(), rows = c.local_rows(b);
  LayerActivations x;
  x.ln1_out = be.alloc(rows_shape(c, b, h), dt);
  x.ln1_mean = be.alloc({rows}, acc_dtype(dt));  // LayerNorm statistics in fp32 under bf16
  x.ln1_rstd = be.alloc({rows}, acc_dtype(dt));
  x.qkv = be.alloc({b, s, 3 * ha}, dt);
  x.attn_stats = be.alloc({b, a, s}, acc_dtype(dt));
  x.attn_out = be.alloc({b, s, ha}, dt);
  x.h1 = be.alloc(rows_shape(c, b, h), dt);
  x.ln2_out = be.alloc(rows_shape(c, b, h), dt);
  x.ln2_mean = be.alloc({rows}, acc_dtype(dt));
  x.ln2_rstd = be.alloc({rows}, acc_dtype(dt));
  x.fc1_out = be.alloc({b, s, f}, dt);
  x.act_out = be.alloc({b, s, f}, dt);
  return x;
}

LayerScratch LayerScratch::allocate(Backend& be, const GPTConfig& c, int64_t b, DType dt) {
  const int64_t s = c.seq, h = c.hidden, f = c.local_ffn(), ha = c.local_attention_width();
  return LayerScratch{be.alloc(rows_shape(c, b, h), dt), be.alloc(rows_shape(c, b, h), dt),
                      be.alloc({b, s, ha}, dt), be.alloc({b, s, 3 * ha}, dt),
                      be.alloc({b, s, f}, dt)};
}

SequenceParallelBuffers SequenceParallelBuffers::allocate(Backend& be, const GPTConfig& c,
                                                          int64_t b, DType dt, DType grad_dt) {
  if (!c.sequence_parallel) return {};
  return {be.alloc({b, c.seq, c.hidden}, dt), be.alloc({b, c.seq, c.hidden}, dt),
          be.alloc({2 * c.hidden}, grad_dt)};
}

TransformerLayer::TransformerLayer(const GPTConfig& config, int64_t index, ParamRegistry& reg,
                                   Communicator* tensor, Fp8Linears* fp8)
    : c_(config), index_(index), tensor_(tensor), fp8_(fp8) {
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
    be.attention_forward(a.attn_out, a.attn_stats, a.qkv, heads, c_.attention_dropout, rng);
    return;
  }
  // Local element ((0 * a/tp + h) * s + i) * s + j of sequence n sits at global
  // ((n * a + tp_rank * a/tp + h) * s + i) * s + j: a constant offset per sequence.
  const int64_t b = a.qkv.dim(0), s = c_.seq;
  for (int64_t n = 0; n < b; ++n) {
    Tensor out = a.attn_out.slice(n, n + 1), stats = a.attn_stats.slice(n, n + 1);
    RngStream r = rng;
    r.offset += static_cast<uint64_t>((n * c_.heads + c_.tp_rank * heads) * s * s);
    be.attention_forward(out, stats, a.qkv.slice(n, n + 1), heads, c_.attention_dropout, r);
  }
}

void TransformerLayer::attention_backward(Backend& be, LayerScratch& sc, const LayerActivations& a,
                                          RngStream rng) const {
  const int64_t heads = c_.local_heads();
  if (c_.tp_size == 1 || c_.attention_dropout <= 0) {
    be.attention_backward(sc.dqkv, sc.dattn, a.qkv, a.attn_out, a.attn_stats, heads,
                          c_.attention_dropout, rng);
    return;
  }
  const int64_t b = a.qkv.dim(0), s = c_.seq;
  for (int64_t n = 0; n < b; ++n) {
    Tensor dqkv = sc.dqkv.slice(n, n + 1);
    RngStream r = rng;
    r.offset += static_cast<uint64_t>((n * c_.heads + c_.tp_rank * heads) * s * s);
    be.attention_backward(dqkv, sc.dattn.slice(n, n + 1), a.qkv.slice(n, n + 1),
                          a.attn_out.slice(n, n + 1), a.attn_stats.slice(n, n + 1), heads,
                          c_.attention_dropout, r);
  }
}

RngStream TransformerLayer::hidden_stream(uint64_t seed, uint64_t mb, DropoutSite site,
                                          int64_t b) const {
  RngStream r = layer_dropout_stream(seed, mb, index_, site);
  r.offset += static_cast<uint64_t>(c_.first_row(b) * c_.hidden);
  return r;
}

void layernorm_backward_sequence_parallel(Backend& be, Tensor& din, Param& w, Param& bias,
                                          const Tensor& dout, const Tensor& in, const Tensor& mean,
                                          const Tensor& rstd, Tensor& ln_grads,
                                          Communicator* tensor) {
  const int64_t h = w.grad.numel();
  Tensor gw = ln_grads.slice(0, h), gb = ln_grads.slice(h, 2 * h);
  be.fill(ln_grads, 0.0);
  be.layernorm_backward(din, gw, gb, dout, in, w.value, mean, rstd);
  sum_over_tensor_group(be, ln_grads, tensor);
  be.add(w.grad, w.grad, gw);
  be.add(bias.grad, bias.grad, gb);
}

void TransformerLayer::forward(Backend& be, LayerActivations& a, Tensor out, const Tensor& x,
                               uint64_t seed, uint64_t mb, SequenceParallelBuffers* sp) const {
  const int64_t b = a.qkv.dim(0);
  const bool seq_par = c_.sequence_parallel;
  MTNLG_CHECK(!seq_par || sp != nullptr);
  const auto rng = [&](DropoutSite site) { return hidden_stream(seed, mb, site, b); };
  // The column-parallel GEMMs' input: the LayerNorm output, all rows.
  const auto gathered = [&](const Tensor& ln_out) {
    if (!seq_par) return ln_out;
    all_gather_rows(be, sp->gathered, ln_out, tensor_);
    return sp->gathered;
  };
  // A row-parallel GEMM into `out` (this rank's rows), then the replicated bias. Under fp8 the
  // partial product is the FP8 GEMM's; the reduction and the bias are the same.
  const auto row_parallel = [&](const Tensor& in, const Param& w, const Param& bias,
                                Fp8Linears::Which which) {
    const bool one_rank = tensor_ == nullptr || tensor_->size() == 1;
    if (fp8_ != nullptr && one_rank)
      return fp8_linear_forward(be, *fp8_, fp8_->at(index_, which), out, in, w, bias);
    if (fp8_ == nullptr && !seq_par)
      return row_parallel_linear_forward(be, out, in, w, bias, tensor_);
    Tensor partial = seq_par ? sp->partial.as_2d() : out.as_2d();
    if (fp8_ != nullptr)
      fp8_gemm_forward(be, *fp8_, fp8_->at(index_, which), partial, in, w);
    else
      be.gemm_weight(partial, in.as_2d(), w.value, true, 1.0, 0.0);
    if (seq_par)
      reduce_scatter_rows(be, out, sp->partial, tensor_);
    else
      reduce_from_tensor_region_forward(be, partial, tensor_);
    Tensor out2 = out.as_2d();
    be.add_bias(out2, bias.value);
  };
  // Attention sub-block; `out` doubles as the buffer of the projected attention output.
  be.layernorm_forward(a.ln1_out, a.ln1_mean, a.ln1_rstd, x, ln1_w_->value, ln1_b_->value,
                       c_.ln_eps);
  if (fp8_ != nullptr) {
    fp8_linear_forward(be, *fp8_, fp8_->at(index_, Fp8Linears::kQkv), a.qkv, gathered(a.ln1_out),
                       *qkv_w_, *qkv_b_);
  } else {
    linear_forward(be, a.qkv, gathered(a.ln1_out), *qkv_w_, *qkv_b_);  // column-parallel
  }
  attention_forward(be, a, layer_dropout_stream(seed, mb, index_, DropoutSite::kAttentionProbs));
  row_parallel(a.attn_out, *dense_w_, *dense_b_, Fp8Linears::kDense);
  // Hidden dropout and the residual add, one call (the CUDA backend fuses them).
  be.dropout_add(a.h1, out, x, c_.hidden_dropout, rng(DropoutSite::kAttentionOutput));
  // MLP sub-block.
  be.layernorm_forward(a.ln2_out, a.ln2_mean, a.ln2_rstd, a.h1, ln2_w_->value, ln2_b_->value,
                       c_.ln_eps);
  // Column-parallel fc1 and its GeLU: one call, which a backend may fuse.
  if (fp8_ != nullptr) {
    fp8_linear_forward(be, *fp8_, fp8_->at(index_, Fp8Linears::kFc1), a.fc1_out,
                       gathered(a.ln2_out), *fc1_w_, *fc1_b_, &a.act_out, c_.activation);
  } else {
    be.linear_bias_forward(a.fc1_out, gathered(a.ln2_out), fc1_w_->value, fc1_b_->value, &a.act_out,
                           c_.activation);
  }
  row_parallel(a.act_out, *fc2_w_, *fc2_b_, Fp8Linears::kFc2);
  be.dropout_add(out, out, a.h1, c_.hidden_dropout, rng(DropoutSite::kMlpOutput));
}

void TransformerLayer::backward(Backend& be, LayerScratch& s, Tensor dres,
                                const LayerActivations& a, const Tensor& x, uint64_t seed,
                                uint64_t mb, SequenceParallelBuffers* sp) {
  const int64_t b = a.qkv.dim(0);
  const bool seq_par = c_.sequence_parallel;
  MTNLG_CHECK(!seq_par || sp != nullptr);
  const auto rng = [&](DropoutSite site) { return hidden_stream(seed, mb, site, b); };
  // A row-parallel GEMM's output gradient, all rows (its bias gradient then sums every row).
  const auto all_rows = [&](const Tensor& local) {
    if (!seq_par) return local;
    all_gather_rows(be, sp->gathered, local, tensor_);
    return sp->gathered;
  };
  // A linear layer's backward (dx, w.grad, the bias's), through FP8 under precision: fp8; the
  // tensor-parallel reductions around it are the callers'.
  const auto linear_bwd = [&](Tensor dx, const Tensor& dy, const Tensor& x, Param& w, Param* bias,
                              Fp8Linears::Which which) {
    if (fp8_ != nullptr)
      return fp8_linear_backward(be, *fp8_, fp8_->at(index_, which), dx, dy, x, w, bias);
    linear_backward(be, dx, dy, x, w, bias);
  };
  // A column-parallel GEMM's backward: dL/d(its input) into s.dln (this rank's rows, summed over
  // the group), its weight gradient from the LayerNorm output `ln_out`, all rows.
  const auto column_backward = [&](const Tensor& dy, const Tensor& ln_out, Param& w, Param* bias,
                                   Fp8Linears::Which which) {
    if (!seq_par) {
      linear_bwd(s.dln, dy, ln_out, w, bias, which);
      copy_to_tensor_region_backward(be, s.dln, tensor_);
      return;
    }
    all_gather_rows(be, sp->gathered, ln_out, tensor_);
    linear_bwd(sp->partial, dy, sp->gathered, w, bias, which);
    reduce_scatter_rows(be, s.dln, sp->partial, tensor_);
  };
  const auto layernorm_backward = [&](Param& w, Param& bias, const Tensor& in, const Tensor& mean,
                                      const Tensor& rstd) {
    if (!seq_par)
      return be.layernorm_backward(dres, w.grad, bias.grad, s.dln, in, w.value, mean, rstd);
    layernorm_backward_sequence_parallel(be, dres, w, bias, s.dln, in, mean, rstd, sp->ln_grads,
                                         tensor_);
  };
  // The gradient into a sub-block's output from dres (dL/d(its sum with the skip path)): through
  // the hidden dropout into s.dh, or without dropout dres itself, which nothing writes until the
  // sub-block's LayerNorm backward, after its last read (a copy moved the whole residual
  // gradient twice a layer for nothing).
  const auto through_dropout = [&](DropoutSite site) -> const Tensor& {
    if (c_.hidden_dropout <= 0) return dres;
    be.dropout_backward(s.dh, dres, c_.hidden_dropout, rng(site));
    return s.dh;
  };
  // MLP sub-block, reversed. dres holds dL/d(out), which is also the skip path's dL/d(h1).
  // A row-parallel GEMM's backward (without tensor parallelism, any linear layer's): dy is
  // replicated, dx this rank's slice, nothing to reduce.
  const auto& row_backward = linear_bwd;
  row_backward(s.dact, all_rows(through_dropout(DropoutSite::kMlpOutput)), a.act_out, *fc2_w_,
               fc2_b_, Fp8Linears::kFc2);
  // GeLU's backward and fc1's bias gradient in one call (the CUDA backend fuses them).
  be.gelu_bias_backward(s.dact, fc1_b_->grad, s.dact, a.fc1_out, c_.activation);
  column_backward(s.dact, a.ln2_out, *fc1_w_, nullptr, Fp8Linears::kFc1);
  layernorm_backward(*ln2_w_, *ln2_b_, a.h1, a.ln2_mean, a.ln2_rstd);
  // Attention sub-block, reversed. dres now holds dL/d(h1) = the skip path's dL/dx.
  row_backward(s.dattn, all_rows(through_dropout(DropoutSite::kAttentionOutput)), a.attn_out,
               *dense_w_, dense_b_, Fp8Linears::kDense);
  attention_backward(be, s, a,
                     layer_dropout_stream(seed, mb, index_, DropoutSite::kAttentionProbs));
  column_backward(s.dqkv, a.ln1_out, *qkv_w_, qkv_b_, Fp8Linears::kQkv);
  layernorm_backward(*ln1_w_, *ln1_b_, x, a.ln1_mean, a.ln1_rstd);
}

}  // namespace mtnlg
