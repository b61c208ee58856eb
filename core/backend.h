// Backend: the kernels the engine runs, behind one interface that the CPU backend
// (core/cpu/) and the CUDA backend (core/cuda/) both implement.
//
// Conventions, as in llm.c:
// - Tensors are contiguous, row-major, on the backend's device. Activations are [b, s, c];
//   kernels treat all leading dimensions as rows ("n" below is b*s).
// - Floating kernels run in the tensors' dtype: f32 for training, f64 for gradient checks.
//   Mixed precision (bf16/fp16) comes with the precision issue.
// - Parameter gradients ACCUMULATE (+=): micro-batches add into them.
// - Input gradients OVERWRITE, except layernorm_backward's din, which accumulates, because a
//   LayerNorm input is the residual stream whose gradient already holds the skip path.
// - Sums that feed a reported number (loss, squared norms) are accumulated in double.
// Thread safety: a Backend is used by one thread at a time; CPU kernels parallelise inside.
//
// The front: every operation is a public non-virtual member that checks what its contract
// says once for every backend (core/backend_checks.h), reports the call to an OpHook when one
// is set (bench/op_timer.h times them for mtnlg-bench-train --profile), and runs the device's
// protected do_<operation>. A backend implements the do_ members; adding an operation is its
// front here, its check, and each device's do_ member with its kernel.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend_checks.h"
#include "core/kernels/fp8_math.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace mtnlg {

enum class Activation { kGelu, kGeluTanh };  // exact erf GeLU, or the tanh approximation

struct AdamWArgs {
  double lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;  // decoupled: param -= lr * wd * param
  int64_t step = 1;           // 1-based, for bias correction
  double grad_scale = 1.0;    // multiplies the gradient first (clipping, loss-scale undo)
  // 1 - beta^step given, where not 0 (a step's device words: AdamWStepWords); 0: from step.
  double bias_correction1 = 0.0;
  double bias_correction2 = 0.0;
};

// The f64 words of an optimizer step kept on the backend's device (Backend::grad_clip_words,
// adamw_update_many_from), so that a captured step (Backend::capture) takes each step's values
// from memory rather than from its recording: the host uploads the first four before the step
// and reads the rest after it, in one wait (optim/captured_adamw_step.h).
struct AdamWStepWords {
  enum : int64_t {
    kLr,               // host: the step's learning rate
    kBiasCorrection1,  // host: 1 - beta1^step (kernels::adamw_bias_correction)
    kBiasCorrection2,  // host: 1 - beta2^step
    kLossScale,        // host: the loss scale the gradients carry (1 without one)
    kGradScale,        // device: the clip coefficient over the loss scale
    kSkip,             // device: 1 when the summed squares or the loss is not finite, else 0
    kSumSquares,       // device: the gradients' summed squares (loss-scaled)
    kLoss,             // device: the step's summed loss, copied from its tensor
    kCount
  };
};

// One parameter's share of an optimizer step (Backend::adamw_update_many): master null for a
// model stepped in its own dtype (adamw_update), the fp32 master for mixed precision
// (adamw_update_rounded). The tensors are the caller's and outlive the call.
struct AdamWItem {
  Tensor* param = nullptr;
  Tensor* master = nullptr;
  const Tensor* grad = nullptr;
  Tensor* m = nullptr;
  Tensor* v = nullptr;
  AdamWArgs args;
};

// The batched steps' items (adamw_update_many, adamw_update_many_from): each with its tensors,
// and adamw_update's or adamw_update_rounded's contract.
inline void check_adamw_items(const char* op, Device device, const std::vector<AdamWItem>& items) {
  for (const AdamWItem& it : items) {
    MTNLG_CHECK_MSG(it.param && it.grad && it.m && it.v, op << ": an item without its tensors");
    if (it.master != nullptr)
      check_adamw_rounded(op, device, *it.param, *it.master, *it.grad, *it.m, *it.v, it.args.step);
    else
      check_adamw(op, device, *it.param, *it.grad, *it.m, *it.v, it.args.step);
  }
}

// One operation called through Backend's front, as an OpHook sees it.
struct OpCall {
  const char* name;      // the operation: "gemm", "layernorm_forward", ...
  const char* category;  // what a profile files it under: a name, or a shard op's whole-vocab name
  // gemm, gemm_weight, linear_bias_forward: the operands a and b with their transposes;
  // attention_forward/backward: a = qkv, b = out (dout backward), c = stats.
  const Tensor* a = nullptr;
  const Tensor* b = nullptr;
  const Tensor* c = nullptr;
  bool trans_a = false;
  bool trans_b = false;
};

// Observes the operations called on a backend from outside it (Backend::set_op_hook); the calls a
// backend's operations make on itself are not reported. end() runs when the operation returns or
// throws, and must not throw.
class OpHook {
 public:
  virtual ~OpHook() = default;
  virtual void begin(const OpCall& call) = 0;
  virtual void end(const OpCall& call) noexcept = 0;
};

// Work recorded by Backend::capture, replayed with the same arguments on whatever its tensors
// then hold, at the addresses it was recorded with.
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  // Runs the recorded calls again; refused once stale() (its owner records again instead).
  void replay() {
    MTNLG_CHECK_MSG(!stale(),
                    "a captured step replayed after its backend moved memory the recording holds "
                    "by address (a workspace grew, or Backend::invalidate_recordings): record "
                    "it again");
    do_replay();
  }
  // Whether the backend has since moved memory a recording may hold by address: one of its own
  // workspaces grew (a CUDA graph keeps the old address, which the allocator may hand to any
  // tensor), or a caller said it may have reallocated (Backend::invalidate_recordings). A replay
  // would write through freed memory; the owner runs the work plainly and records it again.
  bool stale() const { return *epoch_now_ != epoch_; }
  // The device operations a replay runs as one launch (a CUDA graph's nodes: kernels, copies
  // and memsets, a library's included), the launches the recorded calls would make one by one;
  // -1 where nothing is launched (the CPU's calls).
  virtual int64_t launches() const { return -1; }

 protected:
  // `epoch`: the recording backend's (Backend::recording_epoch), which outlives this.
  explicit CapturedWork(const uint64_t& epoch) : epoch_now_(&epoch), epoch_(epoch) {}
  virtual void do_replay() = 0;

 private:
  const uint64_t* epoch_now_;
  uint64_t epoch_;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Reports every operation called from outside to `hook` (not owned; null: none).
  void set_op_hook(OpHook* hook) { hook_ = hook; }

  virtual Device device() const = 0;
  virtual std::string name() const = 0;

  // ---- memory ----
  // A new zero-filled tensor on this device.
  Tensor alloc(const Shape& shape, DType dtype) {
    const OpScope s(*this, {"alloc", "alloc"});
    return do_alloc(shape, dtype);
  }
  void fill(Tensor& t, double value) {
    check_on("fill", "t", t, device());
    const OpScope s(*this, {"fill", "fill"});
    do_fill(t, value);
  }
  // dst = src (same numel; same dtype, or f32<->f64 or f32<->bf16 conversion, bf16 rounded to
  // nearest even). Either side may be a CPU tensor when this is a device backend: that is how
  // host data moves.
  void copy(Tensor& dst, const Tensor& src) {
    // A tensor onto itself: nothing to move (a captured step's inputs, uploaded before replay).
    if (dst.defined() && src.defined() && dst.data() == src.data() && dst.dtype() == src.dtype() &&
        dst.device() == src.device() && dst.numel() == src.numel())
      return;
    const OpScope s(*this, {"copy", "copy"});
    do_copy(dst, src);
  }

  // Memory accounting of alloc(): bytes (numel * dtype size) of the tensors it returned that are
  // still alive (a tensor's bytes are freed when its last handle goes, on any thread), and the
  // most that were alive at once since construction or the last reset_peak(), which restarts
  // the peak from live_bytes(). Thread-safe. A backend that does not count returns 0.
  virtual int64_t live_bytes() const { return 0; }
  virtual int64_t peak_bytes() const { return 0; }
  virtual void reset_peak() {}
  // Bytes a device backend holds from the device for them, most at once since construction
  // (core/caching_allocator.h: live tensors, rounding and cached free blocks); 0 when it does not
  // cache (the CPU's).
  virtual int64_t peak_reserved_bytes() const { return 0; }
  // The same, now.
  virtual int64_t reserved_bytes() const { return 0; }
  // Bytes in use on the backend's device by everything (cudaMemGetInfo: this process's context,
  // its libraries' and NCCL's buffers, the allocator's reservations, and any other process on
  // the same GPU); 0 on the CPU. Beyond reserved_bytes() is what the planner estimates as
  // DeviceOverheads (cmd/planner.h).
  virtual int64_t device_bytes_in_use() const { return 0; }

  // ---- dense algebra ----
  // The elementwise operations' operands are checked by core/backend_checks.h (check_add, ...).
  // c[m, n] = alpha * op(a) @ op(b) + beta * c, with op(x) = x^T when trans_x. a and b are
  // viewed as 2-D (leading dimensions collapsed).
  void gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, double alpha,
            double beta) {
    check_gemm("gemm", device(), c, a, trans_a, b, trans_b);
    const OpScope s(*this, {"gemm", "gemm", &a, &b, nullptr, trans_a, trans_b});
    do_gemm(c, a, trans_a, b, trans_b, alpha, beta);
  }
  // gemm(c, a, false, w, trans_w, alpha, beta) where w is a weight: inside a frozen-weights
  // window (below) a backend may keep w in its GEMM kernel's own layout from its first use to
  // the window's end, with the same results bit for bit.
  void gemm_weight(Tensor& c, const Tensor& a, const Tensor& w, bool trans_w, double alpha,
                   double beta) {
    check_gemm("gemm_weight", device(), c, a, false, w, trans_w);
    const OpScope s(*this, {"gemm_weight", "gemm", &a, &w, nullptr, false, trans_w});
    do_gemm_weight(c, a, w, trans_w, alpha, beta);
  }
  // gemm(c, a, trans_a, b, trans_b, alpha, beta) where a and b hold values on the FP8 grid of
  // formats fa and fb (fp8_cast's outputs, in bf16): the same product. By default the GEMM of
  // their dtype (exact products, fp32 sums: the CPU's emulation); a device with FP8 tensor cores
  // multiplies them as FP8 (the CUDA backend through cuBLASLt where it applies, its sums then
  // the tensor cores').
  void gemm_fp8(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                double alpha, double beta, Fp8Format fa, Fp8Format fb) {
    check_gemm("gemm_fp8", device(), c, a, trans_a, b, trans_b);
    MTNLG_CHECK_MSG(a.dtype() == DType::kBF16 || a.dtype() == DType::kF32,
                    "gemm_fp8: a " << a.str() << " (FP8 values in bf16 or f32)");
    MTNLG_CHECK_MSG(fa == Fp8Format::kE4M3 || fb == Fp8Format::kE4M3,
                    "gemm_fp8: two E5M2 operands (no FP8 GEMM multiplies them)");
    const OpScope s(*this, {"gemm_fp8", "gemm", &a, &b, nullptr, trans_a, trans_b});
    do_gemm_fp8(c, a, trans_a, b, trans_b, alpha, beta, fa, fb);
  }
  // A frozen-weights window (open it with the FrozenWeights guard below): the caller promises
  // that no tensor passed to gemm_weight or hold_weight is written until the window ends, after
  // which nothing kept of a weight's values is used again. The trainer opens one around each
  // iteration's forward and backward passes (and each evaluation), so a weight is reordered (or
  // cast to FP8: model/fp8_linear.h) once per optimizer step, not per micro-batch. A backend that
  // guards writes refuses a write of its own ops into a weight it holds (Code::kInternal), so a
  // broken promise fails loudly instead of training on stale weights. Windows do not nest.
  void begin_frozen_weights() {
    MTNLG_CHECK_MSG(window_ == 0, "frozen-weights windows do not nest");
    window_ = ++windows_;
    do_begin_frozen_weights();
  }
  void end_frozen_weights() {
    window_ = 0;
    do_end_frozen_weights();
  }
  // The open window's number (1, 2, ... over this backend's life), 0 outside a window: what a
  // caller keeping something made from a weight compares with the number it was made in.
  uint64_t frozen_window() const { return window_; }
  // The caller keeps something made from w's values until the window ends (fp8's weight casts):
  // a backend that guards writes refuses writes into w until then. Only inside a window.
  void hold_weight(const Tensor& w) {
    MTNLG_CHECK_MSG(window_ != 0, "hold_weight(" << w.str() << ") outside a frozen-weights window");
    do_hold_weight(w);
  }

  // A linear layer's forward: y = x @ w^T + bias (x viewed as 2-D), then, when gelu_out is not
  // null, gelu_out = GeLU(y) (act) with y kept as the pre-activation gelu_backward reads. One
  // call so that a backend may fuse them (the CUDA one does, in cuBLASLt's epilogue, for
  // bf16/fp16 and the tanh GeLU); by default exactly gemm_weight, add_bias and gelu_forward.
  void linear_bias_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias,
                           Tensor* gelu_out, Activation act) {
    check_gemm("linear_bias_forward", device(), y, x, false, w, true);
    check_add_bias(device(), y, bias);
    if (gelu_out != nullptr) check_gelu_forward(device(), *gelu_out, y);
    const OpScope s(*this, {"linear_bias_forward", gelu_out ? "gemm+bias+gelu" : "gemm+bias", &x,
                            &w, nullptr, false, true});
    do_linear_bias_forward(y, x, w, bias, gelu_out, act);
  }

  // y[n, c] += bias[c]
  void add_bias(Tensor& y, const Tensor& bias) {
    check_add_bias(device(), y, bias);
    const OpScope s(*this, {"add_bias", "add_bias"});
    do_add_bias(y, bias);
  }
  // dbias[c] += sum_n dy[n, c]
  void bias_backward(Tensor& dbias, const Tensor& dy) {
    check_bias_backward(device(), dbias, dy);
    const OpScope s(*this, {"bias_backward", "bias_backward"});
    do_bias_backward(dbias, dy);
  }
  // out = a + b (out may alias a or b)
  void add(Tensor& out, const Tensor& a, const Tensor& b) {
    check_add(device(), out, a, b);
    const OpScope s(*this, {"add", "add"});
    do_add(out, a, b);
  }
  // y += alpha * x
  void axpy(Tensor& y, const Tensor& x, double alpha) {
    check_axpy(device(), y, x);
    const OpScope s(*this, {"axpy", "axpy"});
    do_axpy(y, x, alpha);
  }
  // x *= alpha
  void scale(Tensor& x, double alpha) {
    check_on("scale", "x", x, device());
    const OpScope s(*this, {"scale", "scale"});
    do_scale(x, alpha);
  }
  // sum of x[i]^2, in double
  double sum_squares(const Tensor& x) {
    check_on("sum_squares", "x", x, device());
    const OpScope s(*this, {"sum_squares", "sum_squares"});
    return do_sum_squares(x);
  }
  // max |x[i]| in double: 0 for an empty tensor, NaN when an element is NaN.
  double abs_max(const Tensor& x) {
    check_on("abs_max", "x", x, device());
    const OpScope s(*this, {"abs_max", "abs_max"});
    return do_abs_max(x);
  }
  // out[i] = the `format` value nearest in[i] * scale (ties to even, saturating at the format's
  // largest finite value, NaN kept; fp8_round), stored in out's dtype: bf16 and f32 hold every
  // FP8 value exactly, so the CPU emulates an FP8 GEMM as the bf16 or f32 GEMM of two cast
  // operands scaled by both scales' inverses. Returns abs_max(in) (delayed scaling records it).
  // out and in have the same shape (out may alias in); scale is finite and > 0.
  double fp8_cast(Tensor& out, const Tensor& in, double scale, Fp8Format format) {
    check_fp8_cast(device(), out, in, scale);
    const OpScope s(*this, {"fp8_cast", "fp8_cast"});
    return do_fp8_cast(out, in, scale, format);
  }
  // fp8_cast without reading the amax back (delayed scaling's casts in a step): max |in| goes
  // into amax_bits, one i32 word on this backend's device holding a magnitude's float bits, which
  // keeps the larger of its value and fp8_amax_bits(max |in|) (NaN above infinity). The caller
  // reads its words once a step (fp8_amax_from_bits), where fp8_cast waits for each cast's.
  void fp8_cast_accumulate(Tensor& out, const Tensor& in, double scale, Fp8Format format,
                           Tensor& amax_bits) {
    check_fp8_cast(device(), out, in, scale);
    check_on("fp8_cast_accumulate", "amax_bits", amax_bits, device());
    MTNLG_CHECK_MSG(amax_bits.dtype() == DType::kI32 && amax_bits.numel() == 1,
                    "fp8_cast_accumulate: amax_bits is " << amax_bits.str() << ", want one i32");
    const OpScope s(*this, {"fp8_cast_accumulate", "fp8_cast"});
    do_fp8_cast_accumulate(out, in, scale, format, amax_bits);
  }
  // sum_squares of each tensor, the same values as one call each; a device backend answers
  // with one synchronization instead of one per tensor (the global gradient norm).
  std::vector<double> sum_squares_many(const std::vector<Tensor>& xs) {
    for (const Tensor& x : xs) check_on("sum_squares_many", "x", x, device());
    const OpScope s(*this, {"sum_squares_many", "sum_squares_many"});
    return do_sum_squares_many(xs);
  }
  // sum_squares_many's values, the same bits, into sums (f64 [xs.size()] on this backend's
  // device), read by nothing: no wait (a captured step's gradient norm).
  void sum_squares_into(Tensor& sums, const std::vector<Tensor>& xs) {
    for (const Tensor& x : xs) check_on("sum_squares_into", "x", x, device());
    check_operand("sum_squares_into", "sums", sums, device(), DType::kF64, std::ssize(xs));
    const OpScope s(*this, {"sum_squares_into", "sum_squares_many"});
    do_sum_squares_into(sums, xs);
  }

  // ---- layers ----
  // out, in: [n, c]; weight, bias: [c]; mean, rstd: [n] (saved for backward), in acc_dtype.
  void layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& in,
                         const Tensor& weight, const Tensor& bias, double eps) {
    check_layernorm_forward(device(), out, mean, rstd, in, weight, bias);
    const OpScope s(*this, {"layernorm_forward", "layernorm_forward"});
    do_layernorm_forward(out, mean, rstd, in, weight, bias, eps);
  }
  // din += ...; dweight += ...; dbias += ... din must not alias dout.
  void layernorm_backward(Tensor& din, Tensor& dweight, Tensor& dbias, const Tensor& dout,
                          const Tensor& in, const Tensor& weight, const Tensor& mean,
                          const Tensor& rstd) {
    check_layernorm_backward(device(), din, dweight, dbias, dout, in, weight, mean, rstd);
    const OpScope s(*this, {"layernorm_backward", "layernorm_backward"});
    do_layernorm_backward(din, dweight, dbias, dout, in, weight, mean, rstd);
  }

  // out = act(in), elementwise (out must not alias in)
  void gelu_forward(Tensor& out, const Tensor& in, Activation act) {
    check_gelu_forward(device(), out, in);
    const OpScope s(*this, {"gelu_forward", "gelu_forward"});
    do_gelu_forward(out, in, act);
  }
  // din = dout * act'(in) (din may alias dout, not in)
  void gelu_backward(Tensor& din, const Tensor& dout, const Tensor& in, Activation act) {
    check_gelu_backward("gelu_backward", device(), din, dout, in);
    const OpScope s(*this, {"gelu_backward", "gelu_backward"});
    do_gelu_backward(din, dout, in, act);
  }
  // gelu_backward, then dbias[c] += sum_n din[n, c] of the din just written (fc1's backward
  // through its GeLU). One call so that a backend may fuse them (the CUDA one does: one pass over
  // [n, c] instead of two, the same bits); by default exactly the two calls.
  void gelu_bias_backward(Tensor& din, Tensor& dbias, const Tensor& dout, const Tensor& in,
                          Activation act) {
    check_gelu_backward("gelu_bias_backward", device(), din, dout, in, &dbias);
    const OpScope s(*this, {"gelu_bias_backward", "gelu_bias_backward"});
    do_gelu_bias_backward(din, dbias, dout, in, act);
  }

  // Causal self-attention over heads laid out per head: qkv [b, s, heads * 3 * hd], where the
  // 3*hd columns of head j are (q_j, k_j, v_j), so a split of the columns across tensor-parallel
  // ranks keeps whole heads. out: [b, s, heads * hd]. Scores are scaled by 1/sqrt(hd).
  // stats: [b, heads, s] in the accumulation type (f64 for f64, else f32): each query row's
  // log-sum-exp of its scaled causal scores, all that forward saves of the softmax; backward
  // recomputes the probabilities from q, k and these (flash-attention's contract: nothing of
  // size [s, s] outlives a call).
  // Attention dropout with probability p draws from `rng`, element index
  // ((b * heads + h) * s + i) * s + j, and is regenerated identically in backward.
  void attention_forward(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads,
                         double dropout_p, RngStream rng) {
    check_attention_forward(device(), out, stats, qkv, heads, dropout_p);
    const OpScope s(*this, {"attention_forward", "attention_forward", &qkv, &out, &stats});
    do_attention_forward(out, stats, qkv, heads, dropout_p, based(rng));
  }
  // dqkv = ... (overwrites). out and stats are forward's (a kernel may take rowsum(dout * out)
  // from out rather than from whole recomputed rows).
  void attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                          const Tensor& stats, int64_t heads, double dropout_p, RngStream rng) {
    check_attention_backward(device(), dqkv, dout, qkv, out, stats, heads, dropout_p);
    const OpScope s(*this, {"attention_backward", "attention_backward", &qkv, &dout, &stats});
    do_attention_backward(dqkv, dout, qkv, out, stats, heads, dropout_p, based(rng));
  }

  // out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]; tokens i32 [b, s]; wte [V, c]; wpe [P, c].
  void embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) {
    check_embedding_forward("embedding_forward", device(), out, tokens, wte, wpe, true);
    const OpScope s(*this, {"embedding_forward", "embedding_forward"});
    do_embedding_forward(out, tokens, wte, wpe);
  }
  // dwte[tokens[b, t]] += dout[b, t]; dwpe[t] += sum_b dout[b, t]
  void embedding_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens) {
    check_embedding_backward("embedding_backward", device(), dwte, dwpe, dout, tokens, true);
    const OpScope s(*this, {"embedding_backward", "embedding_backward"});
    do_embedding_backward(dwte, dwpe, dout, tokens);
  }

  // Cross entropy over the first `vocab` columns of logits [n, V_padded] (columns >= vocab are
  // padding and never contribute); targets i32 [n], each in [0, vocab).
  // Returns sum_n -log softmax(logits[n])[targets[n]], in double.
  double cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t vocab) {
    check_cross_entropy("cross_entropy_forward", device(), nullptr, logits, targets, vocab);
    const OpScope s(*this, {"cross_entropy_forward", "cross_entropy_forward"});
    return do_cross_entropy_forward(logits, targets, vocab);
  }
  // total[0] += cross_entropy_forward(logits, targets, vocab) (the same bits), total f64 [1] on
  // the backend's device: a step's losses summed where they are made and read once (a device
  // backend then waits for nothing per micro-batch; core/cuda/cross_entropy_cuda.cu).
  void cross_entropy_forward_add(Tensor& total, const Tensor& logits, const Tensor& targets,
                                 int64_t vocab) {
    const char* op = "cross_entropy_forward_add";
    check_cross_entropy(op, device(), nullptr, logits, targets, vocab);
    check_operand(op, "total", total, device(), DType::kF64, 1);
    const OpScope s(*this, {op, "cross_entropy_forward"});
    do_cross_entropy_forward_add(total, logits, targets, vocab);
  }
  // dlogits = grad_scale * (softmax(logits) - onehot(targets)); padded columns set to 0.
  // dlogits may alias logits (the fused, memory-saving path).
  void cross_entropy_backward(Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                              int64_t vocab, double grad_scale) {
    check_cross_entropy("cross_entropy_backward", device(), &dlogits, logits, targets, vocab);
    const OpScope s(*this, {"cross_entropy_backward", "cross_entropy_backward"});
    do_cross_entropy_backward(dlogits, logits, targets, vocab, grad_scale);
  }

  // ---- vocab-parallel pieces ----
  // model/vocab_parallel.h joins them with the tensor group's all-reduces (Megatron's
  // VocabParallelEmbedding and vocab_parallel_cross_entropy). The rank holds word rows, and so
  // logits columns, [vocab_start, vocab_start + rows) of the padded vocabulary. They run on the
  // device, so tensor parallelism moves no activations through the host. A profile files them
  // under the whole-vocabulary operations' names.
  //
  // out[b, t, :] = wte_local[tokens[b, t] - vocab_start] when the rank holds the token, else 0;
  // plus wpe[t, :] when wpe is defined (one rank of the group adds the positions). Ids are not
  // range-checked here: the ones this rank does not hold belong to other ranks.
  void embedding_shard_forward(Tensor& out, const Tensor& tokens, const Tensor& wte_local,
                               const Tensor& wpe, int64_t vocab_start) {
    check_embedding_forward("embedding_shard_forward", device(), out, tokens, wte_local, wpe,
                            false);
    const OpScope s(*this, {"embedding_shard_forward", "embedding_forward"});
    do_embedding_shard_forward(out, tokens, wte_local, wpe, vocab_start);
  }
  // dwte_local[tokens[b, t] - vocab_start] += dout[b, t] for the tokens the rank holds;
  // dwpe[t] += sum_b dout[b, t] when dwpe is defined. Same order of additions as
  // embedding_backward, so fp32 sums agree bit for bit.
  void embedding_shard_backward(Tensor& dwte_local, Tensor& dwpe, const Tensor& dout,
                                const Tensor& tokens, int64_t vocab_start) {
    check_embedding_backward("embedding_shard_backward", device(), dwte_local, dwpe, dout, tokens,
                             false);
    const OpScope s(*this, {"embedding_shard_backward", "embedding_backward"});
    do_embedding_shard_backward(dwte_local, dwpe, dout, tokens, vocab_start);
  }
  // Cross entropy's local steps on logits [n, cols] holding global columns [vocab_start,
  // vocab_start + cols), the ones below `vocab` real and the rest padding; targets i32 [n] in
  // [0, vocab); statistics in double (f64 tensors).
  // row_max [n]: the max of each row's real columns (-inf when the shard has none).
  void cross_entropy_shard_max(Tensor& row_max, const Tensor& logits, int64_t vocab_start,
                               int64_t vocab) {
    check_ce_shard_max(device(), row_max, logits, vocab_start, vocab);
    const OpScope s(*this, {"cross_entropy_shard_max", "cross_entropy_forward"});
    do_cross_entropy_shard_max(row_max, logits, vocab_start, vocab);
  }
  // stats [2, n]: stats[0, r] = sum over real columns of exp(logits[r, j] - row_max[r]);
  // stats[1, r] = logits[r, targets[r] - vocab_start] when the rank holds the target, else 0.
  void cross_entropy_shard_stats(Tensor& stats, const Tensor& logits, const Tensor& targets,
                                 const Tensor& row_max, int64_t vocab_start, int64_t vocab) {
    check_ce_shard_stats(device(), stats, logits, targets, row_max, vocab_start, vocab);
    const OpScope s(*this, {"cross_entropy_shard_stats", "cross_entropy_forward"});
    do_cross_entropy_shard_stats(stats, logits, targets, row_max, vocab_start, vocab);
  }
  // dlogits[r, j] = grad_scale * (exp(logits[r, j] - row_max[r]) / row_sum[r] - [j holds
  // targets[r]]) on real columns, 0 on padding (kernels::vocab_ce_grad); may alias logits.
  void cross_entropy_shard_backward(Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                                    const Tensor& row_max, const Tensor& row_sum,
                                    int64_t vocab_start, int64_t vocab, double grad_scale) {
    check_ce_shard_backward(device(), dlogits, logits, targets, row_max, row_sum, vocab_start,
                            vocab);
    const OpScope s(*this, {"cross_entropy_shard_backward", "cross_entropy_backward"});
    do_cross_entropy_shard_backward(dlogits, logits, targets, row_max, row_sum, vocab_start, vocab,
                                    grad_scale);
  }

  // out = in * keep / (1 - p), keep drawn from rng element index i (out may alias in).
  void dropout_forward(Tensor& out, const Tensor& in, double p, RngStream rng) {
    check_dropout("dropout_forward", device(), out, in, p);
    const OpScope s(*this, {"dropout_forward", "dropout_forward"});
    do_dropout_forward(out, in, p, based(rng));
  }
  // y = residual + dropout_forward(x): a sub-block's output through the hidden dropout onto the
  // residual stream, one call so that a backend may fuse them (the CUDA one does: one pass over
  // the rows instead of two, the same bits). y may alias x; it aliases residual only when p is 0.
  // By default exactly the two calls (the sum rounded as add rounds it).
  void dropout_add(Tensor& y, const Tensor& x, const Tensor& residual, double p, RngStream rng) {
    check_dropout_add(device(), y, x, residual, p);
    const OpScope s(*this, {"dropout_add", "dropout_add"});
    do_dropout_add(y, x, residual, p, based(rng));
  }
  // din = dout * keep / (1 - p) (din may alias dout)
  void dropout_backward(Tensor& din, const Tensor& dout, double p, RngStream rng) {
    check_dropout("dropout_backward", device(), din, dout, p);
    const OpScope s(*this, {"dropout_backward", "dropout_backward"});
    do_dropout_backward(din, dout, p, based(rng));
  }

  // ---- optimizer ----
  // AdamW on one tensor: g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  // param -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * param).
  void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                    const AdamWArgs& args) {
    check_adamw("adamw_update", device(), param, grad, m, v, args.step);
    const OpScope s(*this, {"adamw_update", "adamw_update"});
    do_adamw_update(param, grad, m, v, args);
  }
  // Mixed precision's step: adamw_update on the fp32 master, then param (bf16 or fp16) = the
  // master rounded to nearest even; the same values as those two calls (which the default
  // makes), in one pass on a device backend.
  void adamw_update_rounded(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                            const AdamWArgs& args) {
    check_adamw_rounded("adamw_update_rounded", device(), param, master, grad, m, v, args.step);
    const OpScope s(*this, {"adamw_update_rounded", "adamw_update_rounded"});
    do_adamw_update_rounded(param, master, grad, m, v, args);
  }
  // adamw_update (or, with a master, adamw_update_rounded) on every item, with the same values:
  // one call for a whole model so that a device backend can step many tensors per launch
  // instead of launching per tensor. By default the calls one by one, in order.
  void adamw_update_many(const std::vector<AdamWItem>& items) {
    check_adamw_items("adamw_update_many", device(), items);
    const OpScope s(*this, {"adamw_update_many", "adamw_update_many"});
    do_adamw_update_many(items);
  }
  // A step's clip on the device, from its per-tensor summed squares `sums` (sum_squares_into)
  // and its summed loss (`loss`, one f64), into `words` (f64 [AdamWStepWords::kCount], the host's
  // four uploaded): kSumSquares = the sum of sums[0, first) plus the sum of the rest (
  // global_grad_norm's order: tensor-sharded gradients, then replicated), kGradScale =
  // clip_coefficient(sqrt(that) / kLossScale, max_norm) / kLossScale, kSkip = 1 when that sum
  // or the loss is not finite, kLoss = the loss (kernels::grad_clip_words). No wait.
  void grad_clip_words(Tensor& words, const Tensor& sums, int64_t first, const Tensor& loss,
                       double max_norm) {
    check_operand("grad_clip_words", "words", words, device(), DType::kF64, AdamWStepWords::kCount);
    check_on("grad_clip_words", "sums", sums, device());
    MTNLG_CHECK_MSG(sums.dtype() == DType::kF64 && first >= 0 && first <= sums.numel(),
                    "grad_clip_words: sums " << sums.str() << " with " << first << " first");
    check_operand("grad_clip_words", "loss", loss, device(), DType::kF64, 1);
    const OpScope s(*this, {"grad_clip_words", "grad_clip_words"});
    do_grad_clip_words(words, sums, first, loss, max_norm);
  }
  // adamw_update_many with every item's learning rate, bias corrections and gradient scale read
  // from `words` (grad_clip_words's; the items' lr, step and grad_scale are not used) and
  // nothing updated when words[kSkip] is not 0: the step a captured step replays.
  void adamw_update_many_from(const std::vector<AdamWItem>& items, const Tensor& words) {
    check_operand("adamw_update_many_from", "words", words, device(), DType::kF64,
                  AdamWStepWords::kCount);
    check_adamw_items("adamw_update_many_from", device(), items);
    const OpScope s(*this, {"adamw_update_many_from", "adamw_update_many"});
    do_adamw_update_many_from(items, words);
  }

  // Blocks until queued work is done (no-op on CPU).
  virtual void synchronize() {}
  // Records `work` (calls on this backend) without running it, to be replayed later with the
  // same arguments: on a GPU as a CUDA graph, one launch for all its kernels (issue #36 item 4:
  // a small model's step is bound by launches). The work must not wait for the device (no value
  // read back, no copy from or to the host: upload before replay()), allocate, or draw random
  // numbers whose offsets the host passes (dropout): each replay would reuse the recorded ones.
  // The CUDA backend refuses what it can see (a wait, an allocation, an upload, more id checks
  // than its words). By default (the CPU) replay() runs the calls again: the same results, so
  // that the CPU tests the callers' use of it.
  virtual std::unique_ptr<CapturedWork> capture(std::function<void()> work) {
    struct Calls final : CapturedWork {
      Calls(const uint64_t& epoch, std::function<void()> w)
          : CapturedWork(epoch), work(std::move(w)) {}
      std::function<void()> work;
      void do_replay() override { work(); }
    };
    return std::make_unique<Calls>(recording_epoch_, std::move(work));
  }
  // Makes every recording so far stale (CapturedWork::stale), for a caller that may have
  // reallocated memory recordings hold by address (an evaluation's plain calls on other shapes
  // may regrow the stage's scratch or a workspace). A backend does it itself when its own
  // workspaces move. Their owners run the next call plainly and record again.
  void invalidate_recordings() { ++recording_epoch_; }
  uint64_t recording_epoch() const { return recording_epoch_; }

  // From now on every random stream a call draws from (dropout, attention's dropout) has `base`
  // added to its sub-stream (RngStream::stream), until set again (0: as given). A captured step
  // records its calls with micro-batch 0's streams; setting the replayed micro-batch's base
  // before each replay() gives the masks an uncaptured call with that micro-batch's streams
  // draws (model/dropout_streams.h: the micro-batch is the sub-stream's high bits). On a GPU the
  // base is a device word written in stream order (no wait) that the kernels read; refused while
  // capturing.
  void set_rng_stream_base(uint64_t base) { do_set_rng_stream_base(base); }

  // How many times the host has waited for the device so far (synchronize, a value read back, a
  // copy to or from pageable host memory): each drains the device's queue of launched work.
  // mtnlg-bench-train reports it per iteration. 0 on the CPU, whose work is done at return.
  virtual int64_t host_waits() const { return 0; }
  // The stream this backend queues its work on (a cudaStream_t for CUDA), so that device
  // communicators can order their operations after it (Communicator::set_compute_stream);
  // nullptr on the CPU, whose work is done when a call returns.
  virtual void* native_stream() const { return nullptr; }

 protected:
  // Bumped by invalidate_recordings and by a backend whose own workspace moved; a recording
  // made at another value is stale.
  uint64_t recording_epoch_ = 0;

  // The device's operations, called by the front above after its checks (same arguments and
  // contracts): those every backend implements, listed once in core/backend_ops.def, then those
  // with a default that composes other operations through the front.
  virtual Tensor do_alloc(const Shape& shape, DType dtype) = 0;
#define MTNLG_BACKEND_OP(R, name, params) virtual R do_##name params = 0;
#include "core/backend_ops.def"
#undef MTNLG_BACKEND_OP
  virtual void do_gemm_weight(Tensor& c, const Tensor& a, const Tensor& w, bool trans_w,
                              double alpha, double beta) {
    gemm(c, a, false, w, trans_w, alpha, beta);
  }
  virtual void do_gemm_fp8(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                           double alpha, double beta, Fp8Format, Fp8Format) {
    gemm(c, a, trans_a, b, trans_b, alpha, beta);
  }
  // By default fp8_cast, then the word read, raised and written back (a device backend does
  // better: core/cuda/fp8_cuda.cu raises it on the device).
  virtual void do_fp8_cast_accumulate(Tensor& out, const Tensor& in, double scale, Fp8Format format,
                                      Tensor& amax_bits) {
    const uint32_t bits = fp8_amax_bits(fp8_cast(out, in, scale, format));
    Tensor word = Tensor::cpu({1}, DType::kI32);
    copy(word, amax_bits);
    int32_t* w = word.data_as<int32_t>();
    if (bits > static_cast<uint32_t>(*w)) {
      *w = static_cast<int32_t>(bits);
      copy(amax_bits, word);
    }
  }
  virtual void do_linear_bias_forward(Tensor& y, const Tensor& x, const Tensor& w,
                                      const Tensor& bias, Tensor* gelu_out, Activation act) {
    Tensor y2 = y.as_2d();
    gemm_weight(y2, x.as_2d(), w, true, 1.0, 0.0);
    add_bias(y2, bias);
    if (gelu_out != nullptr) gelu_forward(*gelu_out, y, act);
  }
  // By default the loss returned, added on the host and written back.
  virtual void do_cross_entropy_forward_add(Tensor& total, const Tensor& logits,
                                            const Tensor& targets, int64_t vocab) {
    const double loss = cross_entropy_forward(logits, targets, vocab);
    Tensor sum = Tensor::cpu({1}, DType::kF64);
    copy(sum, total);
    sum.data_as<double>()[0] += loss;
    copy(total, sum);
  }
  virtual std::vector<double> do_sum_squares_many(const std::vector<Tensor>& xs) {
    std::vector<double> out;
    out.reserve(xs.size());
    for (const Tensor& x : xs) out.push_back(sum_squares(x));
    return out;
  }
  // The step words' defaults compute on the host and copy through it: right for the CPU, where
  // the copies are memory copies; a device backend computes where the words are.
  virtual void do_sum_squares_into(Tensor& sums, const std::vector<Tensor>& xs) {
    const std::vector<double> values = sum_squares_many(xs);
    Tensor host = Tensor::cpu({std::ssize(values)}, DType::kF64);
    std::copy(values.begin(), values.end(), host.data_as<double>());
    copy(sums, host);
  }
  virtual void do_grad_clip_words(Tensor& words, const Tensor& sums, int64_t first,
                                  const Tensor& loss, double max_norm);
  virtual void do_adamw_update_many_from(const std::vector<AdamWItem>& items, const Tensor& words);
  virtual void do_gelu_bias_backward(Tensor& din, Tensor& dbias, const Tensor& dout,
                                     const Tensor& in, Activation act) {
    gelu_backward(din, dout, in, act);
    bias_backward(dbias, din);
  }
  virtual void do_dropout_add(Tensor& y, const Tensor& x, const Tensor& residual, double p,
                              RngStream rng) {
    if (p == 0.0) return add(y, residual, x);
    dropout_forward(y, x, p, rng);
    add(y, residual, y);
  }
  virtual void do_adamw_update_rounded(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                                       Tensor& v, const AdamWArgs& args) {
    adamw_update(master, grad, m, v, args);
    copy(param, master);
  }
  // The frozen-weights window's edges and a held weight (above): nothing by default.
  virtual void do_begin_frozen_weights() {}
  virtual void do_end_frozen_weights() {}
  virtual void do_hold_weight(const Tensor& /*w*/) {}
  virtual void do_adamw_update_many(const std::vector<AdamWItem>& items) {
    for (const AdamWItem& it : items) {
      if (it.master != nullptr)
        adamw_update_rounded(*it.param, *it.master, *it.grad, *it.m, *it.v, it.args);
      else
        adamw_update(*it.param, *it.grad, *it.m, *it.v, it.args);
    }
  }
  // set_rng_stream_base: by default the host keeps the word, which the draws read
  // (RngStream::stream_base); a device backend keeps it in device memory (rng_stream_base).
  virtual void do_set_rng_stream_base(uint64_t base) {
    rng_stream_base_ = base;
  }
  // The word a stream's draws add to its sub-stream, nullptr where they add nothing.
  virtual const uint64_t* rng_stream_base() const {
    return rng_stream_base_ != 0 ? &rng_stream_base_ : nullptr;
  }
  // `rng` as the operations draw it: with the base word (idempotent, so a default that calls
  // another operation's front adds it once).
  RngStream based(RngStream rng) const {
    rng.stream_base = rng_stream_base();
    return rng;
  }

 private:
  // Reports an operation to the hook when it is called from outside (depth 0).
  class OpScope {
   public:
    OpScope(Backend& backend, const OpCall& call)
        : backend_(backend),
          call_(call),
          outer_(backend.running_),
          report_(backend.hook_ != nullptr && backend.depth_ == 0) {
      // An implementation that calls its own operation's front (not Backend::do_<op>, the
      // default) would recurse until the stack ran out.
      MTNLG_CHECK_MSG(outer_ == nullptr || std::string_view(outer_) != call.name,
                      "Backend: the implementation of " << call.name << " called " << call.name
                                                        << " (call Backend::do_" << call.name
                                                        << " for the default)");
      ++backend_.depth_;
      backend_.running_ = call_.name;
      if (report_) backend_.hook_->begin(call_);
    }
    ~OpScope() {
      --backend_.depth_;
      backend_.running_ = outer_;
      if (report_) backend_.hook_->end(call_);
    }
    OpScope(const OpScope&) = delete;
    OpScope& operator=(const OpScope&) = delete;

   private:
    Backend& backend_;
    OpCall call_;
    const char* outer_;
    bool report_;
  };

  uint64_t rng_stream_base_ = 0;  // set_rng_stream_base's word on the host (the default)
  uint64_t window_ = 0;           // the open frozen-weights window's number, 0: none
  uint64_t windows_ = 0;          // windows opened so far
  OpHook* hook_ = nullptr;
  int depth_ = 0;                  // operations running on this backend now (nested inside one)
  const char* running_ = nullptr;  // the innermost of them
};

// Opens a frozen-weights window for its lifetime (Backend::begin_frozen_weights).
class FrozenWeights {
 public:
  explicit FrozenWeights(Backend& backend) : backend_(backend) { backend_.begin_frozen_weights(); }
  ~FrozenWeights() { backend_.end_frozen_weights(); }
  FrozenWeights(const FrozenWeights&) = delete;
  FrozenWeights& operator=(const FrozenWeights&) = delete;

 private:
  Backend& backend_;
};

// The CPU backend. threads <= 0 uses every core.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace mtnlg
