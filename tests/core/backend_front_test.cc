// Backend's front (core/backend.h): each operation's contract is checked once, before any
// device's implementation runs, and an OpHook sees the calls made from outside the backend,
// each once, whatever the implementation calls on itself, and the end of a call that throws.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/status.h"

using namespace mtnlg;

namespace {

// Records the calls it sees: "begin NAME (CATEGORY)" and "end NAME".
class Recorder final : public OpHook {
 public:
  std::vector<std::string> seen;
  void begin(const OpCall& call) override {
    seen.push_back(std::string("begin ") + call.name + " (" + call.category + ")");
  }
  void end(const OpCall& call) noexcept override {
    seen.push_back(std::string("end ") + call.name);
  }
};

// A backend whose implementations only note that they ran: the front's checks must refuse bad
// arguments before any of them does.
class NotingBackend final : public Backend {
 public:
  std::vector<std::string> ran;
  Device device() const override { return Device::kCPU; }
  std::string name() const override { return "noting"; }

 protected:
  Tensor do_alloc(const Shape& shape, DType dtype) override { return Tensor::cpu(shape, dtype); }
  void do_fill(Tensor&, double) override { ran.push_back("fill"); }
  void do_copy(Tensor&, const Tensor&) override { ran.push_back("copy"); }
  void do_gemm(Tensor&, const Tensor&, bool, const Tensor&, bool, double, double) override {
    ran.push_back("gemm");
  }
  void do_add_bias(Tensor&, const Tensor&) override { ran.push_back("add_bias"); }
  void do_bias_backward(Tensor&, const Tensor&) override { ran.push_back("bias_backward"); }
  void do_add(Tensor&, const Tensor&, const Tensor&) override { ran.push_back("add"); }
  void do_axpy(Tensor&, const Tensor&, double) override { ran.push_back("axpy"); }
  void do_scale(Tensor&, double) override { ran.push_back("scale"); }
  double do_sum_squares(const Tensor&) override {
    ran.push_back("sum_squares");
    return 0.0;
  }
  void do_layernorm_forward(Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            double) override {
    ran.push_back("layernorm_forward");
  }
  void do_layernorm_backward(Tensor&, Tensor&, Tensor&, const Tensor&, const Tensor&, const Tensor&,
                             const Tensor&, const Tensor&) override {
    ran.push_back("layernorm_backward");
  }
  void do_gelu_forward(Tensor&, const Tensor&, Activation) override {
    ran.push_back("gelu_forward");
  }
  void do_gelu_backward(Tensor&, const Tensor&, const Tensor&, Activation) override {
    ran.push_back("gelu_backward");
  }
  void do_attention_forward(Tensor&, Tensor&, const Tensor&, int64_t, double, RngStream) override {
    ran.push_back("attention_forward");
  }
  void do_attention_backward(Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                             int64_t, double, RngStream) override {
    ran.push_back("attention_backward");
  }
  void do_embedding_forward(Tensor&, const Tensor&, const Tensor&, const Tensor&) override {
    ran.push_back("embedding_forward");
  }
  void do_embedding_backward(Tensor&, Tensor&, const Tensor&, const Tensor&) override {
    ran.push_back("embedding_backward");
  }
  double do_cross_entropy_forward(const Tensor&, const Tensor&, int64_t) override {
    ran.push_back("cross_entropy_forward");
    return 0.0;
  }
  void do_cross_entropy_backward(Tensor&, const Tensor&, const Tensor&, int64_t, double) override {
    ran.push_back("cross_entropy_backward");
  }
  void do_embedding_shard_forward(Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  int64_t) override {
    ran.push_back("embedding_shard_forward");
  }
  void do_embedding_shard_backward(Tensor&, Tensor&, const Tensor&, const Tensor&,
                                   int64_t) override {
    ran.push_back("embedding_shard_backward");
  }
  void do_cross_entropy_shard_max(Tensor&, const Tensor&, int64_t, int64_t) override {
    ran.push_back("cross_entropy_shard_max");
  }
  void do_cross_entropy_shard_stats(Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t,
                                    int64_t) override {
    ran.push_back("cross_entropy_shard_stats");
  }
  void do_cross_entropy_shard_backward(Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                       const Tensor&, int64_t, int64_t, double) override {
    ran.push_back("cross_entropy_shard_backward");
  }
  void do_dropout_forward(Tensor&, const Tensor&, double, RngStream) override {
    ran.push_back("dropout_forward");
  }
  void do_dropout_backward(Tensor&, const Tensor&, double, RngStream) override {
    ran.push_back("dropout_backward");
  }
  void do_adamw_update(Tensor&, const Tensor&, Tensor&, Tensor&, const AdamWArgs&) override {
    ran.push_back("adamw_update");
  }
};

}  // namespace

TEST_CASE("the front refuses a broken contract before any implementation runs") {
  NotingBackend be;
  const int64_t n = 4, c = 8;
  Tensor x = be.alloc({n, c}, DType::kF32), y = be.alloc({n, c}, DType::kF32);
  Tensor w = be.alloc({c}, DType::kF32), b = be.alloc({c}, DType::kF32);
  Tensor mean = be.alloc({n}, DType::kF32), rstd = be.alloc({n}, DType::kF32);
  Tensor dw = be.alloc({c}, DType::kF32), db = be.alloc({c}, DType::kF32);

  // LayerNorm: din aliasing dout, and a weight of the wrong size.
  CHECK_THROWS_WITH(be.layernorm_backward(y, dw, db, y, x, w, mean, rstd),
                    Catch::Contains("din must not alias dout"));
  Tensor short_w = be.alloc({c - 1}, DType::kF32);
  CHECK_THROWS_WITH(be.layernorm_forward(y, mean, rstd, x, short_w, b, 1e-5),
                    Catch::Contains("weight"));
  // GeLU: out aliasing in; a fused bias gradient of the wrong dtype.
  CHECK_THROWS_WITH(be.gelu_forward(x, x, Activation::kGelu),
                    Catch::Contains("out must not alias in"));
  Tensor db64 = be.alloc({c}, DType::kF64);
  CHECK_THROWS_WITH(be.gelu_bias_backward(y, db64, y, x, Activation::kGelu),
                    Catch::Contains("dbias"));
  // dropout_add: y aliasing residual with dropout on.
  CHECK_THROWS_WITH(be.dropout_add(y, x, y, 0.1, RngStream{1, 0, 0}),
                    Catch::Contains("y aliases residual"));
  CHECK(be.ran.empty());

  // Within the contract, each reaches its implementation.
  be.layernorm_forward(y, mean, rstd, x, w, b, 1e-5);
  be.layernorm_backward(y, dw, db, x, x, w, mean, rstd);
  be.gelu_forward(y, x, Activation::kGelu);
  CHECK(be.ran ==
        std::vector<std::string>{"layernorm_forward", "layernorm_backward", "gelu_forward"});
}

TEST_CASE("an op hook sees each outside call once, nested calls not, and the end of a throw") {
  NotingBackend be;
  Recorder hook;
  be.set_op_hook(&hook);
  Tensor x = be.alloc({2, 4}, DType::kF32), wt = be.alloc({3, 4}, DType::kF32);
  Tensor y = be.alloc({2, 3}, DType::kF32), bias = be.alloc({3}, DType::kF32);
  Tensor g = be.alloc({2, 3}, DType::kF32);
  hook.seen.clear();
  // The default linear_bias_forward runs gemm_weight, gemm, add_bias and gelu_forward on the
  // backend itself: one call is seen, filed as its GEMM with the GeLU.
  be.linear_bias_forward(y, x, wt, bias, &g, Activation::kGelu);
  CHECK(hook.seen == std::vector<std::string>{"begin linear_bias_forward (gemm+bias+gelu)",
                                              "end linear_bias_forward"});
  CHECK(be.ran == std::vector<std::string>{"gemm", "add_bias", "gelu_forward"});
  // A shard operation is filed under its whole-vocabulary name.
  Tensor row_max = be.alloc({2}, DType::kF64), logits = be.alloc({2, 3}, DType::kF32);
  hook.seen.clear();
  be.cross_entropy_shard_max(row_max, logits, 0, 3);
  CHECK(hook.seen ==
        std::vector<std::string>{"begin cross_entropy_shard_max (cross_entropy_forward)",
                                 "end cross_entropy_shard_max"});
  // A refused call is not reported (the check comes first); one that throws inside is ended.
  hook.seen.clear();
  CHECK_THROWS(be.gelu_forward(x, x, Activation::kGelu));
  CHECK(hook.seen.empty());
  be.set_op_hook(nullptr);
  auto cpu = make_cpu_backend(1);
  cpu->set_op_hook(&hook);
  Tensor ints = cpu->alloc({2, 3}, DType::kI32);
  CHECK_THROWS(cpu->gelu_forward(ints, cpu->alloc({2, 3}, DType::kI32), Activation::kGelu));
  REQUIRE(hook.seen.size() >= 2);
  CHECK(hook.seen[hook.seen.size() - 2] == "begin gelu_forward (gelu_forward)");
  CHECK(hook.seen.back() == "end gelu_forward");
  // Detached, nothing more is seen.
  cpu->set_op_hook(nullptr);
  hook.seen.clear();
  Tensor a = cpu->alloc({4}, DType::kF32);
  cpu->scale(a, 2.0);
  CHECK(hook.seen.empty());
}
