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

// LayerNorm's contract (Backend::layernorm_forward and layernorm_backward), written once for
// every backend: in [n, c] of the model's dtype on `device`; weight (and bias) [c] of it; mean and
// rstd [n] and the parameter gradients [c] in acc_dtype; out, din and dout [n, c]; din must not
// alias dout (din accumulates while dout's rows are still read). Returns (n, c).
inline std::pair<int64_t, int64_t> check_layernorm_forward(Device device, const Tensor& out,
                                                           const Tensor& mean, const Tensor& rstd,
                                                           const Tensor& in, const Tensor& weight,
                                                           const Tensor& bias) {
  const char* op = "layernorm_forward";
  MTNLG_CHECK_MSG(in.defined() && in.device() == device && in.ndim() >= 1 && in.dim(-1) > 0,
                  op << ": in is " << (in.defined() ? in.str() : std::string("undefined")));
  const DType dt = in.dtype();
  const int64_t c = in.dim(-1), n = in.numel() / c;
  check_operand(op, "out", out, device, dt, n * c);
  check_operand(op, "mean", mean, device, acc_dtype(dt), n);
  check_operand(op, "rstd", rstd, device, acc_dtype(dt), n);
  check_operand(op, "weight", weight, device, dt, c);
  check_operand(op, "bias", bias, device, dt, c);
  return {n, c};
}

inline std::pair<int64_t, int64_t> check_layernorm_backward(Device device, const Tensor& din,
                                                            const Tensor& dweight,
                                                            const Tensor& dbias, const Tensor& dout,
                                                            const Tensor& in, const Tensor& weight,
                                                            const Tensor& mean,
                                                            const Tensor& rstd) {
  const char* op = "layernorm_backward";
  MTNLG_CHECK_MSG(in.defined() && in.device() == device && in.ndim() >= 1 && in.dim(-1) > 0,
                  op << ": in is " << (in.defined() ? in.str() : std::string("undefined")));
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
  return {n, c};
}

// GeLU's contract (Backend::gelu_forward, gelu_backward, gelu_bias_backward), written once for
// every backend: in on `device`; out, din and dout of in's dtype and size; out must not alias in
// (a linear layer keeps its pre-activation), din may alias dout but not in; dbias [c] in
// acc_dtype for the fused bias gradient.
inline void check_gelu_forward(Device device, const Tensor& out, const Tensor& in) {
  const char* op = "gelu_forward";
  MTNLG_CHECK_MSG(in.defined() && in.device() == device,
                  op << ": in is " << (in.defined() ? in.str() : std::string("undefined")));
  check_operand(op, "out", out, device, in.dtype(), in.numel());
  MTNLG_CHECK_MSG(out.numel() == 0 || out.data() != in.data(), op << ": out must not alias in");
}

inline void check_gelu_backward(const char* op, Device device, const Tensor& din,
                                const Tensor& dout, const Tensor& in,
                                const Tensor* dbias = nullptr) {
  MTNLG_CHECK_MSG(in.defined() && in.device() == device && in.ndim() >= 1,
                  op << ": in is " << (in.defined() ? in.str() : std::string("undefined")));
  check_operand(op, "din", din, device, in.dtype(), in.numel());
  check_operand(op, "dout", dout, device, in.dtype(), in.numel());
  MTNLG_CHECK_MSG(din.numel() == 0 || din.data() != in.data(), op << ": din must not alias in");
  if (dbias != nullptr)
    check_operand(op, "dbias", *dbias, device, acc_dtype(in.dtype()), in.dim(-1));
}

}  // namespace mtnlg
