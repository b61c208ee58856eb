// StubBackend: a Backend whose operations all throw std::logic_error("... is not used by this
// test"), for tests of the layers above a backend (a fake device, the front's checks and hook):
// a test overrides the do_ members it needs and nothing else.
#pragma once

#include <stdexcept>
#include <string>

#include "core/backend.h"

namespace mtnlg::test {

class StubBackend : public Backend {
 public:
  Device device() const override { return Device::kCPU; }
  std::string name() const override { return "stub"; }

 protected:
  [[noreturn]] static void unused(const char* op) {
    throw std::logic_error(std::string(op) + " is not used by this test");
  }
  Tensor do_alloc(const Shape&, DType) override { unused("alloc"); }
  void do_fill(Tensor&, double) override { unused("fill"); }
  void do_copy(Tensor&, const Tensor&) override { unused("copy"); }
  void do_gemm(Tensor&, const Tensor&, bool, const Tensor&, bool, double, double) override {
    unused("gemm");
  }
  void do_add_bias(Tensor&, const Tensor&) override { unused("add_bias"); }
  void do_bias_backward(Tensor&, const Tensor&) override { unused("bias_backward"); }
  void do_add(Tensor&, const Tensor&, const Tensor&) override { unused("add"); }
  void do_axpy(Tensor&, const Tensor&, double) override { unused("axpy"); }
  void do_scale(Tensor&, double) override { unused("scale"); }
  double do_sum_squares(const Tensor&) override { unused("sum_squares"); }
  void do_layernorm_forward(Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            double) override {
    unused("layernorm_forward");
  }
  void do_layernorm_backward(Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&, const Tensor&,
                             const Tensor&, const Tensor&) override {
    unused("layernorm_backward");
  }
  void do_gelu_forward(Tensor&, const Tensor&, Activation) override { unused("gelu_forward"); }
  void do_gelu_backward(Tensor&, const Tensor&, const Tensor&, Activation) override {
    unused("gelu_backward");
  }
  void do_attention_forward(Tensor&, Tensor&, const Tensor&, int64_t, double, RngStream) override {
    unused("attention_forward");
  }
  void do_attention_backward(Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                             int64_t, double, RngStream) override {
    unused("attention_backward");
  }
  void do_embedding_forward(Tensor&, const Tensor&, const Tensor&, const Tensor&) override {
    unused("embedding_forward");
  }
  void do_embedding_backward(Tensor&, Tensor&, const Tensor&, const Tensor&) override {
    unused("embedding_backward");
  }
  double do_cross_entropy_forward(const Tensor&, const Tensor&, int64_t) override {
    unused("cross_entropy_forward");
  }
  void do_cross_entropy_backward(Tensor&, const Tensor&, const Tensor&, int64_t, double) override {
    unused("cross_entropy_backward");
  }
  void do_embedding_shard_forward(Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  int64_t) override {
    unused("embedding_shard_forward");
  }
  void do_embedding_shard_backward(Tensor&, Tensor&, const Tensor&, const Tensor&,
                                   int64_t) override {
    unused("embedding_shard_backward");
  }
  void do_cross_entropy_shard_max(Tensor&, const Tensor&, int64_t, int64_t) override {
    unused("cross_entropy_shard_max");
  }
  void do_cross_entropy_shard_stats(Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t,
                                    int64_t) override {
    unused("cross_entropy_shard_stats");
  }
  void do_cross_entropy_shard_backward(Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                       const Tensor&, int64_t, int64_t, double) override {
    unused("cross_entropy_shard_backward");
  }
  void do_dropout_forward(Tensor&, const Tensor&, double, RngStream) override {
    unused("dropout_forward");
  }
  void do_dropout_backward(Tensor&, const Tensor&, double, RngStream) override {
    unused("dropout_backward");
  }
  void do_adamw_update(Tensor&, const Tensor&, Tensor&, Tensor&, const AdamWArgs&) override {
    unused("adamw_update");
  }
};

}  // namespace mtnlg::test
