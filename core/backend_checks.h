// Shape and dtype rules of Backend operations that do not depend on the device, shared by the
// CPU and CUDA backends (each checks its own device first). A broken rule is a programming error:
// MTNLG_CHECK (Code::kInternal) naming the operation and the tensors.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/kernels/vocab_shard_math.h"
#include "core/status.h"
#include "core/tensor.h"

namespace mtnlg {

// An embedding's tensors: tokens i32 [b, s]; table [rows, c] (the word rows, or their gradient);
// positions [>= s, c] of the table's dtype, or undefined (none). Backward passes dout: the tables
// then hold acc_dtype(dout) (fp32 main gradients for a bf16 model).
inline void check_embedding_shapes(const char* op, const Tensor& tokens, const Tensor& table,
                                   const Tensor& positions, const Tensor* dout = nullptr) {
  const auto str = [](const Tensor& t) { return t.defined() ? t.str() : std::string("undefined"); };
  MTNLG_CHECK_MSG(tokens.dtype() == DType::kI32 && tokens.ndim() == 2 && table.ndim() == 2 &&
                      (!positions.defined() ||
                       (positions.ndim() == 2 && positions.dim(1) == table.dim(1) &&
                        positions.dtype() == table.dtype() && positions.dim(0) >= tokens.dim(1))) &&
                      (dout == nullptr || table.dtype() == acc_dtype(dout->dtype())),
                  op << ": tokens " << tokens.str() << ", table " << table.str() << ", positions "
                     << str(positions)
                     << (dout != nullptr ? ", dout " + dout->str() : std::string()));
}

// The vocab-parallel cross entropy's shard (Backend::cross_entropy_shard_*): logits [n, cols]
// holding global columns [vocab_start, vocab_start + cols) of a vocabulary of `vocab`. Returns
// (n, how many of its columns are real vocabulary).
inline std::pair<int64_t, int64_t> ce_shard_rows_and_real(const char* op, const Tensor& logits,
                                                          int64_t vocab_start, int64_t vocab) {
  MTNLG_CHECK_MSG(
      logits.ndim() >= 1 && vocab_start >= 0 && vocab > 0,
      op << ": logits " << logits.str() << ", vocab_start " << vocab_start << ", vocab " << vocab);
  const int64_t cols = logits.dim(-1);
  return {cols > 0 ? logits.numel() / cols : 0,
          kernels::shard_real_columns(vocab_start, cols, vocab)};
}

// A tensor of an operation: defined, on `device`, of `dtype` with `numel` elements.
inline void check_operand(const char* op, const char* what, const Tensor& t, Device device,
                          DType dtype, int64_t numel) {
  MTNLG_CHECK_MSG(t.defined(), op << ": " << what << " is undefined");
  MTNLG_CHECK_MSG(t.device() == device && t.dtype() == dtype && t.numel() == numel,
                  op << ": " << what << " is " << t.str() << ", want " << dtype_name(dtype)
                     << " with " << numel << " elements on the backend's device");
}

// A tensor an operation reads or writes in place: defined and on `device`.
inline void check_on(const char* op, const char* what, const Tensor& t, Device device) {
  MTNLG_CHECK_MSG(t.defined(), op << ": " << what << " is undefined");
  MTNLG_CHECK_MSG(t.device() == device,
                  op << ": " << what << " is " << t.str() << ", not on the backend's device");
}

// LayerNorm's contract (Backend::layernorm_forward and layernorm_backward), written once for
// every backend: in [n, c] of the model's dtype on `device`; weight (and bias) [c] of it; mean and
// rstd [n] and the parameter gradients [c] in acc_dtype; out, din and dout [n, c]; din must not
// alias dout (din accumulates while dout's rows are still read).
inline void check_layernorm_rows(const char* op, Device device, const Tensor& in) {
  check_on(op, "in", in, device);
  MTNLG_CHECK_MSG(in.ndim() >= 1 && in.dim(-1) > 0, op << ": in is " << in.str());
}

inline void check_layernorm_forward(Device device, const Tensor& out, const Tensor& mean,
                                    const Tensor& rstd, const Tensor& in, const Tensor& weight,
                                    const Tensor& bias) {
  const char* op = "layernorm_forward";
  check_layernorm_rows(op, device, in);
  const DType dt = in.dtype();
  const int64_t c = in.dim(-1), n = in.numel() / c;
  check_operand(op, "out", out, device, dt, n * c);
  check_operand(op, "mean", mean, device, acc_dtype(dt), n);
  check_operand(op, "rstd", rstd, device, acc_dtype(dt), n);
  check_operand(op, "weight", weight, device, dt, c);
  check_operand(op, "bias", bias, device, dt, c);
}

inline void check_layernorm_backward(Device device, const Tensor& din, const Tensor& dweight,
                                     const Tensor& dbias, const Tensor& dout, const Tensor& in,
                                     const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  const char* op = "layernorm_backward";
  check_layernorm_rows(op, device, in);
  const DType dt = in.dtype();
  const int64_t c = in.dim(-1), n = in.numel() / c;
  check_operand(op, "din", din, device, dt, n * c);
  check_operand(op, "dout", dout, device, dt, n * c);
  check_operand(op, "dweight", dweight, device, acc_dtype(dt), c);
  check_operand(op, "dbias", dbias, device, acc_dtype(dt), c);
  check_operand(op, "weight", weight, device, dt, c);
  check_operand(op, "mean", mean, device, acc_dtype(dt), n);
  check_operand(op, "rstd", rstd, device, acc_dtype(dt), n);
  MTNLG_CHECK_MSG(din.data() != dout.data(), op << ": din must not alias dout");
}

// GeLU's contract (Backend::gelu_forward, gelu_backward, gelu_bias_backward), written once for
// every backend: in on `device`; out, din and dout of in's dtype and size; out must not alias in
// (a linear layer keeps its pre-activation), din may alias dout but not in; dbias [c] in
// acc_dtype for the fused bias gradient.
inline void check_gelu_forward(Device device, const Tensor& out, const Tensor& in) {
  const char* op = "gelu_forward";
  check_on(op, "in", in, device);
  check_operand(op, "out", out, device, in.dtype(), in.numel());
  MTNLG_CHECK_MSG(out.numel() == 0 || out.data() != in.data(), op << ": out must not alias in");
}

inline void check_gelu_backward(const char* op, Device device, const Tensor& din,
                                const Tensor& dout, const Tensor& in,
                                const Tensor* dbias = nullptr) {
  check_on(op, "in", in, device);
  MTNLG_CHECK_MSG(in.ndim() >= 1, op << ": in is " << in.str());
  check_operand(op, "din", din, device, in.dtype(), in.numel());
  check_operand(op, "dout", dout, device, in.dtype(), in.numel());
  MTNLG_CHECK_MSG(din.numel() == 0 || din.data() != in.data(), op << ": din must not alias in");
  if (dbias != nullptr)
    check_operand(op, "dbias", *dbias, device, acc_dtype(in.dtype()), in.dim(-1));
}

// The elementwise family (add, axpy, scale, sum_squares, add_bias, bias_backward): every
// operand on `device`; add's and axpy's of out's dtype and size; a bias [c] of y's dtype, its
// gradient [c] in acc_dtype(dy) (the fp32 main gradient of a bf16 model).
inline void check_add(Device device, const Tensor& out, const Tensor& a, const Tensor& b) {
  check_on("add", "out", out, device);
  check_operand("add", "a", a, device, out.dtype(), out.numel());
  check_operand("add", "b", b, device, out.dtype(), out.numel());
}
// fp8_cast: in on `device`, out of its element count in f32 or bf16 (they hold every FP8
// value), the scale finite and positive.
inline void check_fp8_cast(Device device, const Tensor& out, const Tensor& in, double scale) {
  check_on("fp8_cast", "in", in, device);
  check_on("fp8_cast", "out", out, device);
  MTNLG_CHECK_MSG(
      out.numel() == in.numel() && (out.dtype() == DType::kF32 || out.dtype() == DType::kBF16),
      "fp8_cast: out is " << out.str() << ", want f32 or bf16 with " << in.numel() << " elements");
  MTNLG_CHECK_MSG(scale > 0.0 && scale <= 3.4e38,
                  "fp8_cast: scale " << scale << " is not finite and > 0");
}
inline void check_axpy(Device device, const Tensor& y, const Tensor& x) {
  check_on("axpy", "y", y, device);
  check_operand("axpy", "x", x, device, y.dtype(), y.numel());
}
inline void check_add_bias(Device device, const Tensor& y, const Tensor& bias) {
  check_on("add_bias", "y", y, device);
  MTNLG_CHECK_MSG(y.ndim() >= 1 && y.dim(-1) > 0, "add_bias: y is " << y.str());
  check_operand("add_bias", "bias", bias, device, y.dtype(), y.dim(-1));
}
inline void check_bias_backward(Device device, const Tensor& dbias, const Tensor& dy) {
  check_on("bias_backward", "dy", dy, device);
  MTNLG_CHECK_MSG(dy.ndim() >= 1 && dy.dim(-1) > 0, "bias_backward: dy is " << dy.str());
  check_operand("bias_backward", "dbias", dbias, device, acc_dtype(dy.dtype()), dy.dim(-1));
}

// Dropout's probability: [0, 1).
inline void check_dropout_p(const char* op, double p) {
  MTNLG_CHECK_MSG(p >= 0.0 && p < 1.0, op << ": dropout probability " << p << " not in [0, 1)");
}
// dropout_forward / dropout_backward: out (din) of in's (dout's) dtype and size; may alias it.
inline void check_dropout(const char* op, Device device, const Tensor& out, const Tensor& in,
                          double p) {
  check_on(op, "in", in, device);
  check_operand(op, "out", out, device, in.dtype(), in.numel());
  check_dropout_p(op, p);
}
// dropout_add: y, x and residual of one dtype and size; y may alias x, and residual only when p
// is 0 (dropout needs y for x's dropped copy before the sum).
inline void check_dropout_add(Device device, const Tensor& y, const Tensor& x,
                              const Tensor& residual, double p) {
  check_on("dropout_add", "x", x, device);
  check_operand("dropout_add", "y", y, device, x.dtype(), x.numel());
  check_operand("dropout_add", "residual", residual, device, x.dtype(), x.numel());
  check_dropout_p("dropout_add", p);
  MTNLG_CHECK_MSG(p == 0.0 || y.data() != residual.data(),
                  "dropout_add: y aliases residual (dropout needs y for x's dropped copy)");
}

// Attention's contract (attention_forward, attention_backward): qkv [b, s, heads * 3 * hd] on
// `device`; out, dout [b, s, heads * hd] and dqkv like qkv, of qkv's dtype; stats [b, heads, s]
// in acc_dtype; dropout in [0, 1). Returns (b, s, hd).
struct AttentionDims {
  int64_t b, s, hd;
};
inline AttentionDims attention_dims(const char* op, Device device, const Tensor& qkv,
                                    int64_t heads) {
  check_on(op, "qkv", qkv, device);
  MTNLG_CHECK_MSG(
      qkv.ndim() == 3 && heads > 0 && qkv.dim(2) > 0 && qkv.dim(2) % (3 * heads) == 0,
      op << ": qkv " << qkv.str() << " is not [b, s, heads*3*hd] with heads = " << heads);
  return {qkv.dim(0), qkv.dim(1), qkv.dim(2) / (3 * heads)};
}
inline void check_attention_forward(Device device, const Tensor& out, const Tensor& stats,
                                    const Tensor& qkv, int64_t heads, double p) {
  const char* op = "attention_forward";
  const auto [b, s, hd] = attention_dims(op, device, qkv, heads);
  check_dropout_p(op, p);
  check_operand(op, "out", out, device, qkv.dtype(), b * s * heads * hd);
  check_operand(op, "stats", stats, device, acc_dtype(qkv.dtype()), b * heads * s);
}
inline void check_attention_backward(Device device, const Tensor& dqkv, const Tensor& dout,
                                     const Tensor& qkv, const Tensor& out, const Tensor& stats,
                                     int64_t heads, double p) {
  const char* op = "attention_backward";
  const auto [b, s, hd] = attention_dims(op, device, qkv, heads);
  check_dropout_p(op, p);
  check_operand(op, "dqkv", dqkv, device, qkv.dtype(), qkv.numel());
  check_operand(op, "dout", dout, device, qkv.dtype(), b * s * heads * hd);
  // out must be forward's: a kernel may take rowsum(dout * out) from it.
  check_operand(op, "out", out, device, qkv.dtype(), b * s * heads * hd);
  check_operand(op, "stats", stats, device, acc_dtype(qkv.dtype()), b * heads * s);
}

// AdamW's contract: grad, m and v of param's dtype and size (adamw_update), or of the fp32
// master's with param the model's copy of it (adamw_update_rounded); the step 1-based.
inline void check_adamw(const char* op, Device device, const Tensor& param, const Tensor& grad,
                        const Tensor& m, const Tensor& v, int64_t step) {
  check_on(op, "param", param, device);
  check_operand(op, "grad", grad, device, param.dtype(), param.numel());
  check_operand(op, "m", m, device, param.dtype(), param.numel());
  check_operand(op, "v", v, device, param.dtype(), param.numel());
  MTNLG_CHECK_MSG(step >= 1, op << ": step " << step << " (1-based)");
}
inline void check_adamw_rounded(const char* op, Device device, const Tensor& param,
                                const Tensor& master, const Tensor& grad, const Tensor& m,
                                const Tensor& v, int64_t step) {
  check_on(op, "param", param, device);
  check_on(op, "master", master, device);
  MTNLG_CHECK_MSG(master.numel() == param.numel(),
                  op << ": master " << master.str() << " is not param's size " << param.str());
  check_adamw(op, device, master, grad, m, v, step);
}

// The embeddings' contract (embedding_forward/backward and their vocab-parallel shards):
// tokens, the table (or its gradient) and the positions on `device` with
// check_embedding_shapes's rules (positions required by the whole-vocabulary operations,
// optional in a shard: one rank of the group adds them); out and dout [b, s, c], out of the
// table's dtype. Token ids come from data: each device checks them where they are.
inline void check_embedding_forward(const char* op, Device device, const Tensor& out,
                                    const Tensor& tokens, const Tensor& table,
                                    const Tensor& positions, bool positions_required) {
  check_on(op, "tokens", tokens, device);
  check_on(op, "the table", table, device);
  if (positions_required || positions.defined()) check_on(op, "wpe", positions, device);
  check_embedding_shapes(op, tokens, table, positions);
  check_operand(op, "out", out, device, table.dtype(), tokens.numel() * table.dim(1));
}
inline void check_embedding_backward(const char* op, Device device, const Tensor& dtable,
                                     const Tensor& dpositions, const Tensor& dout,
                                     const Tensor& tokens, bool positions_required) {
  check_on(op, "tokens", tokens, device);
  check_on(op, "the table's gradient", dtable, device);
  check_on(op, "dout", dout, device);
  if (positions_required || dpositions.defined()) check_on(op, "dwpe", dpositions, device);
  check_embedding_shapes(op, tokens, dtable, dpositions, &dout);
  check_operand(op, "dout", dout, device, dout.dtype(), tokens.numel() * dtable.dim(1));
}

// Cross entropy's contract (cross_entropy_forward/backward): logits [n, V_padded] on `device`,
// dlogits like them, targets i32 [n], 0 < vocab <= V_padded. Target ids: each device's.
inline void check_cross_entropy(const char* op, Device device, const Tensor* dlogits,
                                const Tensor& logits, const Tensor& targets, int64_t vocab) {
  check_on(op, "logits", logits, device);
  MTNLG_CHECK_MSG(logits.ndim() >= 1 && logits.dim(-1) > 0, op << ": logits " << logits.str());
  const int64_t vp = logits.dim(-1), n = logits.numel() / vp;
  if (dlogits != nullptr) check_operand(op, "dlogits", *dlogits, device, logits.dtype(), n * vp);
  check_operand(op, "targets", targets, device, DType::kI32, n);
  MTNLG_CHECK_MSG(vocab > 0 && vocab <= vp,
                  op << ": vocab " << vocab << " for logits " << logits.str());
}

// The vocab-parallel cross entropy's steps: logits [n, cols] on `device`; targets i32 [n];
// row_max, row_sum [n] and stats [2, n] in f64; dlogits like logits.
inline int64_t check_ce_shard(const char* op, Device device, const Tensor& logits,
                              const Tensor* targets, int64_t vocab_start, int64_t vocab) {
  check_on(op, "logits", logits, device);
  const int64_t n = ce_shard_rows_and_real(op, logits, vocab_start, vocab).first;
  if (targets != nullptr) check_operand(op, "targets", *targets, device, DType::kI32, n);
  return n;
}
inline void check_ce_shard_max(Device device, const Tensor& row_max, const Tensor& logits,
                               int64_t vocab_start, int64_t vocab) {
  const char* op = "cross_entropy_shard_max";
  const int64_t n = check_ce_shard(op, device, logits, nullptr, vocab_start, vocab);
  check_operand(op, "row_max", row_max, device, DType::kF64, n);
}
inline void check_ce_shard_stats(Device device, const Tensor& stats, const Tensor& logits,
                                 const Tensor& targets, const Tensor& row_max, int64_t vocab_start,
                                 int64_t vocab) {
  const char* op = "cross_entropy_shard_stats";
  const int64_t n = check_ce_shard(op, device, logits, &targets, vocab_start, vocab);
  check_operand(op, "row_max", row_max, device, DType::kF64, n);
  check_operand(op, "stats", stats, device, DType::kF64, 2 * n);
}
inline void check_ce_shard_backward(Device device, const Tensor& dlogits, const Tensor& logits,
                                    const Tensor& targets, const Tensor& row_max,
                                    const Tensor& row_sum, int64_t vocab_start, int64_t vocab) {
  const char* op = "cross_entropy_shard_backward";
  const int64_t n = check_ce_shard(op, device, logits, &targets, vocab_start, vocab);
  check_operand(op, "dlogits", dlogits, device, logits.dtype(), logits.numel());
  check_operand(op, "row_max", row_max, device, DType::kF64, n);
  check_operand(op, "row_sum", row_sum, device, DType::kF64, n);
}

// The GEMMs' contract (gemm, gemm_weight and the product of linear_bias_forward): a, b and c on
// `device`; a and b of one dtype; c of theirs, or f32 for bf16/fp16 operands (fp32 sums written
// wide); op(a) [m, k] @ op(b) [k, n] into c [..., n] of m * n elements, a and b viewed as 2-D.
inline void check_gemm(const char* op, Device device, const Tensor& c, const Tensor& a,
                       bool trans_a, const Tensor& b, bool trans_b) {
  check_on(op, "a", a, device);
  check_on(op, "b", b, device);
  check_on(op, "c", c, device);
  MTNLG_CHECK_MSG(a.ndim() >= 1 && b.ndim() >= 1 && c.ndim() >= 1,
                  op << ": a " << a.str() << ", b " << b.str() << ", c " << c.str());
  const Tensor a2 = a.as_2d(), b2 = b.as_2d();
  const int64_t m = trans_a ? a2.dim(1) : a2.dim(0), k = trans_a ? a2.dim(0) : a2.dim(1);
  const int64_t kb = trans_b ? b2.dim(1) : b2.dim(0), n = trans_b ? b2.dim(0) : b2.dim(1);
  MTNLG_CHECK_MSG(k == kb && c.dim(-1) == n && c.numel() == m * n,
                  op << ": c " << c.str() << " = a" << (trans_a ? "^T " : " ") << a.str() << " @ b"
                     << (trans_b ? "^T " : " ") << b.str());
  const DType ab = a.dtype();
  const bool narrow = ab == DType::kBF16 || ab == DType::kF16;
  MTNLG_CHECK_MSG(b.dtype() == ab && (c.dtype() == ab || (narrow && c.dtype() == DType::kF32)),
                  op << ": " << dtype_name(ab) << " a needs " << dtype_name(ab) << " b and a "
                     << dtype_name(ab) << (narrow ? " or f32" : "") << " c, got " << b.str() << ", "
                     << c.str());
}

}  // namespace mtnlg
