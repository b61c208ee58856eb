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

  Tensor alloc(const Shape& shape, DType dtype) override;
  int64_t live_bytes() const override;
  int64_t peak_bytes() const override;
  void reset_peak() override;
  void fill(Tensor& t, double value) override;
  void copy(Tensor& dst, const Tensor& src) override;

  void gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, double alpha,
            double beta) override;
  // bf16 inside a frozen-weights window: the weight's oneDNN blocked copy, reordered on its
  // first use in the window and reused until it ends; its memory (counted in live_bytes) is kept
  // for the next window, freed after one that does not use it. Otherwise gemm().
  void gemm_weight(Tensor& c, const Tensor& a, const Tensor& w, bool trans_w, double alpha,
                   double beta) override;
  void begin_frozen_weights() override;
  void end_frozen_weights() override;
  void add_bias(Tensor& y, const Tensor& bias) override;
  void bias_backward(Tensor& dbias, const Tensor& dy) override;
  void add(Tensor& out, const Tensor& a, const Tensor& b) override;
  void axpy(Tensor& y, const Tensor& x, double alpha) override;
  void scale(Tensor& x, double alpha) override;
  double sum_squares(const Tensor& x) override;

  void layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& in,
                         const Tensor& weight, const Tensor& bias, double eps) override;
  void layernorm_backward(Tensor& din, Tensor& dweight, Tensor& dbias, const Tensor& dout,
                          const Tensor& in, const Tensor& weight, const Tensor& mean,
                          const Tensor& rstd) override;
  void gelu_forward(Tensor& out, const Tensor& in, Activation act) override;
  void gelu_backward(Tensor& din, const Tensor& dout, const Tensor& in, Activation act) override;
  void attention_forward(Tensor& out, Tensor& stats, const Tensor& qkv, int64_t heads,
                         double dropout_p, RngStream rng) override;
  void attention_backward(Tensor& dqkv, const Tensor& dout, const Tensor& qkv, const Tensor& out,
                          const Tensor& stats, int64_t heads, double dropout_p,
                          RngStream rng) override;
  void embedding_forward(Tensor& out, const Tensor& tokens, const Tensor& wte,
                         const Tensor& wpe) override;
  void embedding_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout,
                          const Tensor& tokens) override;
  double cross_entropy_forward(const Tensor& logits, const Tensor& targets, int64_t vocab) override;
  void cross_entropy_backward(Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                              int64_t vocab, double grad_scale) override;
  void embedding_shard_forward(Tensor& out, const Tensor& tokens, const Tensor& wte_local,
                               const Tensor& wpe, int64_t vocab_start) override;
  void embedding_shard_backward(Tensor& dwte_local, Tensor& dwpe, const Tensor& dout,
                                const Tensor& tokens, int64_t vocab_start) override;
  void cross_entropy_shard_max(Tensor& row_max, const Tensor& logits, int64_t vocab_start,
                               int64_t vocab) override;
  void cross_entropy_shard_stats(Tensor& stats, const Tensor& logits, const Tensor& targets,
                                 const Tensor& row_max, int64_t vocab_start,
                                 int64_t vocab) override;
  void cross_entropy_shard_backward(Tensor& dlogits, const Tensor& logits, const Tensor& targets,
                                    const Tensor& row_max, const Tensor& row_sum,
                                    int64_t vocab_start, int64_t vocab, double grad_scale) override;
  void dropout_forward(Tensor& out, const Tensor& in, double p, RngStream rng) override;
  void dropout_backward(Tensor& din, const Tensor& dout, double p, RngStream rng) override;
  void adamw_update(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v,
                    const AdamWArgs& args) override;
  // Fused for bf16/fp16 weights on fp32 masters (one pass over memory); else Backend's default.
  void adamw_update_rounded(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                            const AdamWArgs& args) override;

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
