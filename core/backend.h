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
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

class Backend {
 public:
  virtual ~Backend() = default;

  virtual Device device() const = 0;
  virtual std::string name() const = 0;

  // ---- memory ----
  // A new zero-filled tensor on this device.
  virtual Tensor alloc(const Shape& shape, DType dtype) = 0;
  virtual void fill(Tensor& t, double value) = 0;
  // dst = src (same numel; same dtype, or f32<->f64 or f32<->bf16 conversion, bf16 rounded to
  // nearest even). Either side may be a CPU tensor when this is a device backend: that is how
  // host data moves.
  virtual void copy(Tensor& dst, const Tensor& src) = 0;

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
  // c[m, n] = alpha * op(a) @ op(b) + beta * c, with op(x) = x^T when trans_x. a and b are
  // viewed as 2-D (leading dimensions collapsed).
  virtual void gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                    double alpha, double beta) = 0;
  // gemm(c, a, false, w, trans_w, alpha, beta) where w is a weight: inside a frozen-weights
  // window (below) a backend may keep w in its GEMM kernel's own layout from its first use to
  // the window's end, with the same results bit for bit.
  virtual void gemm_weight(Tensor& c, const Tensor& a, const Tensor& w, bool trans_w, double alpha,
                           double beta) {
    gemm(c, a, false, w, trans_w, alpha, beta);
  }
  // A frozen-weights window (open it with the FrozenWeights guard below): the caller promises
  // that no tensor passed to gemm_weight is written until the window ends, after which nothing
  // the backend kept of a weight's values is used again. The trainer opens one around each
  // iteration's forward and backward passes (and each evaluation), so a weight is reordered once
  // per optimizer step, not per micro-batch. A backend that keeps copies refuses a write of its own
  // ops into a weight it holds (Code::kInternal), so a broken promise fails loudly instead of
  // training on stale weights. Windows do not nest.
  virtual void begin_frozen_weights() {}
  virtual void end_frozen_weights() {}

  // A linear layer's forward: y = x @ w^T + bias (x viewed as 2-D), then, when gelu_out is not
  // null, gelu_out = GeLU(y) (act) with y kept as the pre-activation gelu_backward reads. One
  // call so that a backend may fuse them (the CUDA one does, in cuBLASLt's epilogue, for
  // bf16/fp16 and the tanh GeLU); by default exactly gemm_weight, add_bias and gelu_forward.
  virtual void linear_bias_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias,
                                   Tensor* gelu_out, Activation act) {
    Tensor y2 = y.as_2d();
    gemm_weight(y2, x.as_2d(), w, true, 1.0, 0.0);
    add_bias(y2, bias);
    if (gelu_out != nullptr) gelu_forward(*gelu_out, y, act);
  }

  // y[n, c] += bias[c]
  virtual void add_bias(Tensor& y, const Tensor& bias) = 0;
  // dbias[c] += sum_n dy[n, c]
  virtual void bias_backward(Tensor& dbias, const Tensor& dy) = 0;
  // out = a + b (out may alias a or b)
  virtual void add(Tensor& out, const Tensor& a, const Tensor& b) = 0;
  // y += alpha * x
  virtual void axpy(Tensor& y, const Tensor& x, double alpha) = 0;
  // x *= alpha
  virtual void scale(Tensor& x, double alpha) = 0;
  // sum of x[i]^2, in double
  virtual double sum_squares(const Tensor& x) = 0;
  // sum_squares of each tensor, the same values as one call each; a device backend answers
  // with one synchronization instead of one per tensor (the global gradient norm).
  virtual std::vector<double> sum_squares_many(const std::vector<Tensor>& xs) {
    std::vector<double> out;
    out.reserve(xs.size());
    for (const Tensor& x : xs) out.push_back(sum_squares(x));
    return out;
  }

  // ---- layers ----
  // out, in: [n, c]; weight, bias: [c]; mean, rstd: [n] (saved for backward). Every backend
  // checks this contract with the same code (core/backend_checks.h check_layernorm_*).
  virtual void layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& in,
                                 const Tensor& weight, const Tensor& bias, double eps) = 0;
  // din += ...; dweight += ...; dbias += ... din must not alias dout (refused on every backend).
  virtual void layernorm_backward(Tensor& din, Tensor& dweight, Tensor& dbias, const Tensor& dout,
                                  const Tensor& in, const Tensor& weight, const Tensor& mean,
                                  const Tensor& rstd) = 0;

  // out = act(in), elementwise (out must not alias in; checked on every backend by the same code,
  // core/backend_checks.h check_gelu_*)
  virtual void gelu_forward(Tensor& out, const Tensor& in, Activation act) = 0;
  // din = dout * act'(in) (din may alias dout, not in)
  virtual void gelu_backward(Tensor& din, const Tensor& dout, const Tensor& in, Activation act) = 0;
  // gelu_backward, then dbias[c] += sum_n din[n, c] of the din just written (fc1's backward
  // through its GeLU). One call so that a backend may fuse them (the CUDA one does: one pass over
  // [n, c] instead of two, the same bits); by default exactly the two calls.
  virtual void gelu_bias_backward(Tensor& din, Tensor& dbias, const Tensor& dout, const Tensor& in,
                                  Activation act) {
    gelu_backward(din, dout, in, act);
    bias_backward(dbias, din);
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
  virtual void attention_forward(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads,
                                 double dropout_p, RngStream rng) = 0;
  // dqkv = ... (overwrites). out and stats are forward's (a kernel may take rowsum(dout * out)
  // from out rather than from whole recomputed rows).
  virtual void attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv,
                                  const Tensor& out, const Tensor& stats, int64_t heads,
                                  double dropout_p, RngStream rng) = 0;

  // out[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]; tokens i32 [b, s]; wte [V, c]; wpe [P, c].
  virtual void embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte,
                                 const Tensor& wpe) = 0;
  // dwte[tokens[b, t]] += dout[b, t]; dwpe[t] += sum_b dout[b, t]
  virtual void embedding_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                                  const Tensor& tokens) = 0;

  // Cross entropy over the first `vocab` columns of logits [n, V_padded] (columns >= vocab are
  // padding and never contribute); targets i32 [n], each in [0, vocab).
  // Returns sum_n -log softmax(logits[n])[targets[n]], in double.
  virtual double cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                       int64_t vocab) = 0;
  // dlogits = grad_scale * (softmax(logits) - onehot(targets)); padded columns set to 0.
  // dlogits may alias logits (the fused, memory-saving path).
  virtual void cross_entropy_backward(Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                                      int64_t vocab, double grad_scale) = 0;

  // ---- vocab-parallel pieces ----
  // model/vocab_parallel.h joins them with the tensor group's all-reduces (Megatron's
  // VocabParallelEmbedding and vocab_parallel_cross_entropy). The rank holds word rows, and so
  // logits columns, [vocab_start, vocab_start + rows) of the padded vocabulary. They run on the
  // device, so tensor parallelism moves no activations through the host.
  //
  // out[b, t, :] = wte_local[tokens[b, t] - vocab_start] when the rank holds the token, else 0;
  // plus wpe[t, :] when wpe is defined (one rank of the group adds the positions). Ids are not
  // range-checked here: the ones this rank does not hold belong to other ranks.
  virtual void embedding_shard_forward(Tensor& out, const Tensor& tokens, const Tensor& wte_local,
                                       const Tensor& wpe, int64_t vocab_start) = 0;
  // dwte_local[tokens[b, t] - vocab_start] += dout[b, t] for the tokens the rank holds;
  // dwpe[t] += sum_b dout[b, t] when dwpe is defined. Same order of additions as
  // embedding_backward, so fp32 sums agree bit for bit.
  virtual void embedding_shard_backward(Tensor& dwte_local, Tensor& dwpe, const Tensor& dout,
                                        const Tensor& tokens, int64_t vocab_start) = 0;
  // Cross entropy's local steps on logits [n, cols] holding global columns [vocab_start,
  // vocab_start + cols), the ones below `vocab` real and the rest padding; targets i32 [n] in
  // [0, vocab); statistics in double (f64 tensors).
  // row_max [n]: the max of each row's real columns (-inf when the shard has none).
  virtual void cross_entropy_shard_max(Tensor& row_max, const Tensor& logits, int64_t vocab_start,
                                       int64_t vocab) = 0;
  // stats [2, n]: stats[0, r] = sum over real columns of exp(logits[r, j] - row_max[r]);
  // stats[1, r] = logits[r, targets[r] - vocab_start] when the rank holds the target, else 0.
  virtual void cross_entropy_shard_stats(Tensor& stats, const Tensor& logits, const Tensor& targets,
                                         const Tensor& row_max, int64_t vocab_start,
                                         int64_t vocab) = 0;
  // dlogits[r, j] = grad_scale * (exp(logits[r, j] - row_max[r]) / row_sum[r] - [j holds
  // targets[r]]) on real columns, 0 on padding (kernels::vocab_ce_grad); may alias logits.
  virtual void cross_entropy_shard_backward(Tensor& dlogits, const Tensor& logits,
                                            const Tensor& targets, const Tensor& row_max,
                                            const Tensor& row_sum, int64_t vocab_start,
                                            int64_t vocab, double grad_scale) = 0;

  // out = in * keep / (1 - p), keep drawn from rng element index i (out may alias in).
  virtual void dropout_forward(Tensor& out, const Tensor& in, double p, RngStream rng) = 0;
  // y = residual + dropout_forward(x): a sub-block's output through the hidden dropout onto the
  // residual stream, one call so that a backend may fuse them (the CUDA one does: one pass over
  // the rows instead of two, the same bits). y may alias x; it aliases residual only when p is 0.
  // By default exactly the two calls (the sum rounded as add rounds it).
  virtual void dropout_add(Tensor& y, const Tensor& x, const Tensor& residual, double p,
                           RngStream rng) {
    if (p == 0.0) return add(y, residual, x);
    MTNLG_CHECK_MSG(y.data() != residual.data(),
                    "dropout_add: y aliases residual (dropout needs y for x's dropped copy)");
    dropout_forward(y, x, p, rng);
    add(y, residual, y);
  }
  // din = dout * keep / (1 - p) (din may alias dout)
  virtual void dropout_backward(Tensor& din, const Tensor& dout, double p, RngStream rng) = 0;

  // ---- optimizer ----
  // AdamW on one tensor: g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  // param -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * param).
  virtual void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                            const AdamWArgs& args) = 0;
  // Mixed precision's step: adamw_update on the fp32 master, then param (bf16 or fp16) = the
  // master rounded to nearest even; the same values as those two calls (which this default
  // makes), in one pass on a device backend.
  virtual void adamw_update_rounded(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                                    Tensor& v, const AdamWArgs& args) {
    adamw_update(master, grad, m, v, args);
    copy(param, master);
  }
  // adamw_update (or, with a master, adamw_update_rounded) on every item, with the same values:
  // one call for a whole model so that a device backend can step many tensors per launch
  // instead of launching per tensor. By default the calls one by one, in order.
  virtual void adamw_update_many(const std::vector<AdamWItem>& items) {
    for (const AdamWItem& it : items) {
      if (it.master != nullptr)
        adamw_update_rounded(*it.param, *it.master, *it.grad, *it.m, *it.v, it.args);
      else
        adamw_update(*it.param, *it.grad, *it.m, *it.v, it.args);
    }
  }

  // Blocks until queued work is done (no-op on CPU).
  virtual void synchronize() {}
  // The stream this backend queues its work on (a cudaStream_t for CUDA), so that device
  // communicators can order their operations after it (Communicator::set_compute_stream);
  // nullptr on the CPU, whose work is done when a call returns.
  virtual void* native_stream() const { return nullptr; }
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
