// TimingBackend: a Backend decorator that forwards every call to another Backend and adds the
// call's wall time to a per-category total, for mtnlg-bench-train --profile.
//
// A category is "<phase>/<op>", where the phase is whatever the caller last set (forward,
// backward, optimizer, ...). GEMMs are further keyed by shape and transposes
// ("gemm NT m=1024 n=2304 k=768"), so each projection of the model shows up on its own line
// with its achieved GFLOP/s. Each call is followed by inner.synchronize() so that a device
// backend is timed too (a no-op on CPU). Wraps, does not own, the inner backend. Not
// thread-safe (like every Backend).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/backend.h"

namespace mtnlg::bench {

struct OpTiming {
  int64_t calls = 0;
  double seconds = 0.0;
  double flops = 0.0;  // GEMMs only: 2*m*n*k per call
};

class TimingBackend final : public Backend {
 public:
  explicit TimingBackend(Backend& inner) : inner_(inner) {}

  // Names a GEMM for the report (e.g. "fc1 fwd" from its shape); empty: the shape alone.
  using GemmLabeler =
      std::function<std::string(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k)>;
  void set_gemm_labeler(GemmLabeler labeler) { labeler_ = std::move(labeler); }

  // Subsequent calls are attributed to `phase`.
  void set_phase(std::string phase) { phase_ = std::move(phase); }
  // Totals since construction or the last reset(), by category.
  const std::map<std::string, OpTiming>& timings() const { return timings_; }
  void reset() { timings_.clear(); }

  Device device() const override { return inner_.device(); }
  std::string name() const override { return "timed " + inner_.name(); }

  Tensor alloc(const Shape& shape, DType dtype) override;
  void fill(Tensor& t, double value) override;
  void copy(Tensor& dst, const Tensor& src) override;
  void gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, double alpha,
            double beta) override;
  void gemm_weight(Tensor& c, const Tensor& a, const Tensor& w, bool trans_w, double alpha,
                   double beta) override;
  void begin_frozen_weights() override;
  void end_frozen_weights() override;
  void linear_bias_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor& bias,
                           Tensor* gelu_out, Activation act) override;
  void add_bias(Tensor& y, const Tensor& bias) override;
  void bias_backward(Tensor& dbias, const Tensor& dy) override;
  void add(Tensor& out, const Tensor& a, const Tensor& b) override;
  void axpy(Tensor& y, const Tensor& x, double alpha) override;
  void scale(Tensor& x, double alpha) override;
  double sum_squares(const Tensor& x) override;
  std::vector<double> sum_squares_many(const std::vector<Tensor>& xs) override;
  void adamw_update_many(const std::vector<AdamWItem>& items) override;
  void adamw_update_rounded(Tensor& param, Tensor& master, const Tensor& grad, Tensor& m, Tensor& v,
                            const AdamWArgs& args) override;
  void layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& in,
                         const Tensor& weight, const Tensor& bias, double eps) override;
  void layernorm_backward(Tensor& din, Tensor& dweight, Tensor& dbias, const Tensor& dout,
                          const Tensor& in, const Tensor& weight, const Tensor& mean,
                          const Tensor& rstd) override;
  void gelu_forward(Tensor& out, const Tensor& in, Activation act) override;
  void gelu_backward(Tensor& din, const Tensor& dout, const Tensor& in, Activation act) override;
  void dropout_add(Tensor& y, const Tensor& x, const Tensor& residual, double p,
                   RngStream rng) override;
  void gelu_bias_backward(Tensor& din, Tensor& dbias, const Tensor& dout, const Tensor& in,
                          Activation act) override;
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
  void synchronize() override { inner_.synchronize(); }

 private:
  // Times a GEMM under its shape's label (and the labeler's name for it).
  void timed_gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                  const std::function<void()>& run, const char* what = "gemm");
  // Runs fn() on the inner backend, synchronizes, and charges the time to `op`.
  template <typename F>
  auto timed(const std::string& op, double flops, F&& fn) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    struct Charge {  // charges on scope exit, so value-returning calls need no special case
      TimingBackend& self;
      const std::string& op;
      double flops;
      Clock::time_point t0;
      ~Charge() {
        self.inner_.synchronize();
        OpTiming& t = self.timings_[self.phase_ + "/" + op];
        ++t.calls;
        t.seconds += std::chrono::duration<double>(Clock::now() - t0).count();
        t.flops += flops;
      }
    } charge{*this, op, flops, t0};
    return fn();
  }

  Backend& inner_;
  GemmLabeler labeler_;
  std::string phase_ = "other";
  std::map<std::string, OpTiming> timings_;
};

}  // namespace mtnlg::bench
