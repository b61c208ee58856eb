#include "bench/timing_backend.h"

#include <sstream>

namespace mtnlg::bench {

Tensor TimingBackend::alloc(const Shape& shape, DType dtype) {
  return timed("alloc", 0.0, [&] { return inner_.alloc(shape, dtype); });
}
void TimingBackend::fill(Tensor& t, double value) {
  timed("fill", 0.0, [&] { inner_.fill(t, value); });
}
void TimingBackend::copy(Tensor& dst, const Tensor& src) {
  timed("copy", 0.0, [&] { inner_.copy(dst, src); });
}

void TimingBackend::gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                         double alpha, double beta) {
  timed_gemm(a, trans_a, b, trans_b, [&] { inner_.gemm(c, a, trans_a, b, trans_b, alpha, beta); });
}

void TimingBackend::gemm_weight(Tensor& c, const Tensor& a, const Tensor& w, bool trans_w,
                                double alpha, double beta) {
  timed_gemm(a, false, w, trans_w, [&] { inner_.gemm_weight(c, a, w, trans_w, alpha, beta); });
}

// Timed as its GEMM, under "gemm+bias" or "gemm+bias+gelu": a backend may fuse them.
void TimingBackend::linear_bias_forward(Tensor& y, const Tensor& x, const Tensor& w,
                                        const Tensor& bias, Tensor* gelu_out, Activation act) {
  timed_gemm(
      x, false, w, true, [&] { inner_.linear_bias_forward(y, x, w, bias, gelu_out, act); },
      gelu_out ? "gemm+bias+gelu" : "gemm+bias");
}

void TimingBackend::begin_frozen_weights() {
  inner_.begin_frozen_weights();
}
void TimingBackend::end_frozen_weights() {
  inner_.end_frozen_weights();
}

void TimingBackend::timed_gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                               const std::function<void()>& run, const char* what) {
  const Tensor a2 = a.as_2d(), b2 = b.as_2d();
  const int64_t m = trans_a ? a2.dim(1) : a2.dim(0), k = trans_a ? a2.dim(0) : a2.dim(1);
  const int64_t n = trans_b ? b2.dim(0) : b2.dim(1);
  std::ostringstream key;
  key << what << ' ' << (trans_a ? 'T' : 'N') << (trans_b ? 'T' : 'N') << " m=" << m << " n=" << n
      << " k=" << k;
  if (labeler_) {
    const std::string label = labeler_(trans_a, trans_b, m, n, k);
    if (!label.empty()) key << " (" << label << ")";
  }
  timed(key.str(), 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k),
        run);
}

void TimingBackend::add_bias(Tensor& y, const Tensor& bias) {
  timed("add_bias", 0.0, [&] { inner_.add_bias(y, bias); });
}
void TimingBackend::bias_backward(Tensor& dbias, const Tensor& dy) {
  timed("bias_backward", 0.0, [&] { inner_.bias_backward(dbias, dy); });
}
void TimingBackend::add(Tensor& out, const Tensor& a, const Tensor& b) {
  timed("add", 0.0, [&] { inner_.add(out, a, b); });
}
void TimingBackend::axpy(Tensor& y, const Tensor& x, double alpha) {
  timed("axpy", 0.0, [&] { inner_.axpy(y, x, alpha); });
}
void TimingBackend::scale(Tensor& x, double alpha) {
  timed("scale", 0.0, [&] { inner_.scale(x, alpha); });
}
void TimingBackend::adamw_update_many(const std::vector<AdamWItem>& items) {
  timed("adamw_update_many", 0.0, [&] { inner_.adamw_update_many(items); });
}
void TimingBackend::adamw_update_rounded(Tensor& param, Tensor& master, const Tensor& grad,
                                         Tensor& m, Tensor& v, const AdamWArgs& args) {
  timed("adamw_update_rounded", 0.0,
        [&] { inner_.adamw_update_rounded(param, master, grad, m, v, args); });
}
std::vector<double> TimingBackend::sum_squares_many(const std::vector<Tensor>& xs) {
  return timed("sum_squares_many", 0.0, [&] { return inner_.sum_squares_many(xs); });
}
double TimingBackend::sum_squares(const Tensor& x) {
  return timed("sum_squares", 0.0, [&] { return inner_.sum_squares(x); });
}

void TimingBackend::layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& in,
                                      const Tensor& weight, const Tensor& bias, double eps) {
  timed("layernorm_forward", 0.0,
        [&] { inner_.layernorm_forward(out, mean, rstd, in, weight, bias, eps); });
}
void TimingBackend::layernorm_backward(Tensor& din, Tensor& dweight, Tensor& dbias,
                                       const Tensor& dout, const Tensor& in, const Tensor& weight,
                                       const Tensor& mean, const Tensor& rstd) {
  timed("layernorm_backward", 0.0,
        [&] { inner_.layernorm_backward(din, dweight, dbias, dout, in, weight, mean, rstd); });
}

void TimingBackend::gelu_forward(Tensor& out, const Tensor& in, Activation act) {
  timed("gelu_forward", 0.0, [&] { inner_.gelu_forward(out, in, act); });
}
void TimingBackend::gelu_backward(Tensor& din, const Tensor& dout, const Tensor& in,
                                  Activation act) {
  timed("gelu_backward", 0.0, [&] { inner_.gelu_backward(din, dout, in, act); });
}

void TimingBackend::dropout_add(Tensor& y, const Tensor& x, const Tensor& residual, double p,
                                RngStream rng) {
  timed("dropout_add", 0.0, [&] { inner_.dropout_add(y, x, residual, p, rng); });
}

void TimingBackend::gelu_bias_backward(Tensor& din, Tensor& dbias, const Tensor& dout,
                                       const Tensor& in, Activation act) {
  timed("gelu_bias_backward", 0.0, [&] { inner_.gelu_bias_backward(din, dbias, dout, in, act); });
}

// Attention's FLOPs (QK^T and PV over the full s x s square, as the model count does):
// 2 * 2 * b * heads * s * s * hd forward, twice that backward.
// Model FLOPs of the four [s, s] products (2 in forward, 4 in backward, the causal upper
// triangle counted as Megatron counts it; backward's recomputed scores are not model FLOPs).
void TimingBackend::attention_forward(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads,
                                      double dropout_p, RngStream rng) {
  const double flops = 4.0 * static_cast<double>(stats.numel()) * static_cast<double>(qkv.dim(1)) *
                       static_cast<double>(out.dim(-1) / heads);
  timed("attention_forward", flops,
        [&] { inner_.attention_forward(out, stats, qkv, heads, dropout_p, rng); });
}
void TimingBackend::attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                       const Tensor& out, const Tensor& stats, int64_t heads,
                                       double dropout_p, RngStream rng) {
  const double flops = 8.0 * static_cast<double>(stats.numel()) * static_cast<double>(qkv.dim(1)) *
                       static_cast<double>(dout.dim(-1) / heads);
  timed("attention_backward", flops,
        [&] { inner_.attention_backward(dqkv, dout, qkv, out, stats, heads, dropout_p, rng); });
}

void TimingBackend::embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte,
                                      const Tensor& wpe) {
  timed("embedding_forward", 0.0, [&] { inner_.embedding_forward(out, tokens, wte, wpe); });
}
void TimingBackend::embedding_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                                       const Tensor& tokens) {
  timed("embedding_backward", 0.0, [&] { inner_.embedding_backward(dwte, dwpe, dout, tokens); });
}

double TimingBackend::cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                            int64_t vocab) {
  return timed("cross_entropy_forward", 0.0,
               [&] { return inner_.cross_entropy_forward(logits, targets, vocab); });
}
void TimingBackend::cross_entropy_backward(Tensor& dlogits, const Tensor& logits,
                                           const Tensor& targets, int64_t vocab,
                                           double grad_scale) {
  timed("cross_entropy_backward", 0.0,
        [&] { inner_.cross_entropy_backward(dlogits, logits, targets, vocab, grad_scale); });
}

void TimingBackend::embedding_shard_forward(Tensor& out, const Tensor& tokens,
                                            const Tensor& wte_local, const Tensor& wpe,
                                            int64_t vocab_start) {
  timed("embedding_forward", 0.0,
        [&] { inner_.embedding_shard_forward(out, tokens, wte_local, wpe, vocab_start); });
}
void TimingBackend::embedding_shard_backward(Tensor& dwte_local, Tensor& dwpe, const Tensor& dout,
                                             const Tensor& tokens, int64_t vocab_start) {
  timed("embedding_backward", 0.0,
        [&] { inner_.embedding_shard_backward(dwte_local, dwpe, dout, tokens, vocab_start); });
}
void TimingBackend::cross_entropy_shard_max(Tensor& row_max, const Tensor& logits,
                                            int64_t vocab_start, int64_t vocab) {
  timed("cross_entropy_forward", 0.0,
        [&] { inner_.cross_entropy_shard_max(row_max, logits, vocab_start, vocab); });
}
void TimingBackend::cross_entropy_shard_stats(Tensor& stats, const Tensor& logits,
                                              const Tensor& targets, const Tensor& row_max,
                                              int64_t vocab_start, int64_t vocab) {
  timed("cross_entropy_forward", 0.0, [&] {
    inner_.cross_entropy_shard_stats(stats, logits, targets, row_max, vocab_start, vocab);
  });
}
void TimingBackend::cross_entropy_shard_backward(Tensor& dlogits, const Tensor& logits,
                                                 const Tensor& targets, const Tensor& row_max,
                                                 const Tensor& row_sum, int64_t vocab_start,
                                                 int64_t vocab, double grad_scale) {
  timed("cross_entropy_backward", 0.0, [&] {
    inner_.cross_entropy_shard_backward(dlogits, logits, targets, row_max, row_sum, vocab_start,
                                        vocab, grad_scale);
  });
}
void TimingBackend::dropout_forward(Tensor& out, const Tensor& in, double p, RngStream rng) {
  timed("dropout_forward", 0.0, [&] { inner_.dropout_forward(out, in, p, rng); });
}
void TimingBackend::dropout_backward(Tensor& din, const Tensor& dout, double p, RngStream rng) {
  timed("dropout_backward", 0.0, [&] { inner_.dropout_backward(din, dout, p, rng); });
}

void TimingBackend::adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                                 const AdamWArgs& args) {
  timed("adamw_update", 0.0, [&] { inner_.adamw_update(param, grad, m, v, args); });
}

}  // namespace mtnlg::bench
