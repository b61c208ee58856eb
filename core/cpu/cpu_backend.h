// CpuBackend: the Backend of core/backend.h on the host, for f32 (training) and f64 (gradient
// checks); other dtypes throw Code::kUnsupported naming the op. It owns no tensors; alloc()
// returns 64-byte-aligned host memory owned by the tensor handles, counted in live_bytes() /
// peak_bytes() until the last handle goes.
//
// Threads: kernels run OpenMP regions with `threads` threads (set on the calling thread at each
// call, since OpenMP's thread count is a per-thread setting) and single-threaded OpenBLAS inside
// them (see gemm_cpu.cc). Like every Backend, one instance is used by one thread at a time;
// separate instances may run concurrently (ranks as threads in tests).
#pragma once

#include <memory>
#include <string>

#include "core/backend.h"
#include "core/cpu/matmul_bf16.h"
#include "core/memory_counter.h"

namespace mtnlg {

class CpuBackend final : public Backend {
 public:
  // threads <= 0: one per core.
  explicit CpuBackend(int threads);

  int threads() const { return threads_; }

  Device device() const override { return Device::kCPU; }
  std::string name() const override;

  int64_t live_bytes() const override;
  int64_t peak_bytes() const override;
  void reset_peak() override;

  void begin_frozen_weights() override;
  void end_frozen_weights() override;

 protected:
  Tensor do_alloc(const Shape& shape, DType dtype) override;
  void do_fill(Tensor& t, double value) override;
  void do_copy(Tensor& dst, const Tensor& src) override;
  void do_gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
               double alpha, double beta) override;
  // bf16 inside a frozen-weights window: the weight's oneDNN blocked copy, reordered on its
  // first use in the window and reused until it ends; its memory (counted in live_bytes) is kept
  // for the next window, freed after one that does not use it. Otherwise gemm().
  void do_gemm_weight(Tensor& c, const Tensor& a, const Tensor& w, bool trans_w, double alpha,
                      double beta) override;
  void do_add_bias(Tensor& y, const Tensor& bias) override;
  void do_bias_backward(Tensor& dbias, const Tensor& dy) override;
  void do_add(Tensor& out, const Tensor& a, const Tensor& b) override;
  void do_axpy(Tensor& y, const Tensor& x, double alpha) override;
  void do_scale(Tensor& x, double alpha) override;
  double do_sum_squares(const Tensor& x) override;
  void do_layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& in,
                            const Tensor& weight, const Tensor& bias, double eps) override;
  void do_layernorm_backward(Tensor& din, Tensor& dweight, Tensor& dbias, const Tensor& dout,
                             const Tensor& in, const Tensor& weight, const Tensor& mean,
                             const Tensor& rstd) override;
  void do_gelu_forward(Tensor& out, const Tensor& in, Activation act) override;
  void do_gelu_backward(Tensor& din, const Tensor& dout, const Tensor& in, Activation act) override;
  void do_attention_forward(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads,
                            double dropout_p, RngStream rng) override;
  void do_attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                             const Tensor& stats, int64_t heads, double dropout_p,
                             RngStream rng) override;
  void do_embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte,
                            const Tensor& wpe) override;
  void do_embedding_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                             const Tensor& tokens) override;
  double do_cross_entropy_forward(const Tensor& logits, const Tensor& targets,
                                  int64_t vocab) override;
  void do_cross_entropy_backward(Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                                 int64_t vocab, double grad_scale) override;
  void do_embedding_shard_forward(Tensor& out, const Tensor& tokens, const Tensor& wte_local,
                                  const Tensor& wpe, int64_t vocab_start) override;
  void do_embedding_shard_backward(Tensor& dwte_local, Tensor& dwpe, const Tensor& dout,
                                   const Tensor& tokens, int64_t vocab_start) override;
  void do_cross_entropy_shard_max(Tensor& row_max, const Tensor& logits, int64_t vocab_start,
                                  int64_t vocab) override;
  void do_cross_entropy_shard_stats(Tensor& stats, const Tensor& logits, const Tensor& targets,
                                    const Tensor& row_max, int64_t vocab_start,
                                    int64_t vocab) override;
  void do_cross_entropy_shard_backward(Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                                       const Tensor& row_max, const Tensor& row_sum,
                                       int64_t vocab_start, int64_t vocab,
                                       double grad_scale) override;
  void do_dropout_forward(Tensor& out, const Tensor& in, double p, RngStream rng) override;
  void do_dropout_backward(Tensor& din, const Tensor& dout, double p, RngStream rng) override;
  void do_adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                       const AdamWArgs& args) override;
  // Fused for bf16/fp16 weights on fp32 masters (one pass over memory); else Backend's default.
  void do_adamw_update_rounded(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m,
                               Tensor& v, const AdamWArgs& args) override;

 private:
  void enter() const;  // applies threads_ to the calling thread's OpenMP setting
  void gemm_impl(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                 double alpha, double beta, bool b_weight);
  // Inside a frozen-weights window, refuses a write to memory a held weight copy came from.
  void guard_write(const Tensor& t, const char* op) const;
  int threads_;
  std::unique_ptr<cpu::MatmulBf16> matmul_bf16_;  // bf16 GEMMs (oneDNN), primitives cached
  std::shared_ptr<MemoryCounter> counter_ = std::make_shared<MemoryCounter>();
  bool frozen_ = false;  // inside a frozen-weights window
};

}  // namespace mtnlg
