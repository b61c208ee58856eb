// Backend's front (core/backend.h): each operation's contract is checked once, before any
// device's implementation runs, and an OpHook sees the calls made from outside the backend,
// each once, whatever the implementation calls on itself, and the end of a call that throws.
#include <catch2/catch.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "core/backend.h"
#include "core/status.h"
#include "stub_backend.h"

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
  // Every other operation (core/backend_ops.def) notes its name and returns zero.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define MTNLG_BACKEND_OP(R, name, params) \
  R do_##name params override {           \
    return noted<R>(#name);               \
  }
#include "core/backend_ops.def"
#undef MTNLG_BACKEND_OP
#pragma GCC diagnostic pop

 private:
  template <typename R>
  R noted(const char* op) {
    ran.push_back(op);
    if constexpr (!std::is_void_v<R>) return R{};
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
  // The other families: elementwise sizes, a bias gradient not in acc_dtype, dropout's
  // probability (the CUDA backend did not check it), attention's stats, AdamW's 1-based step.
  Tensor z = be.alloc({n, c + 1}, DType::kF32);
  CHECK_THROWS_WITH(be.add(y, x, z), Catch::Contains("add: b is"));
  Tensor dy16 = be.alloc({n, c}, DType::kBF16), db16 = be.alloc({c}, DType::kBF16);
  CHECK_THROWS_WITH(be.bias_backward(db16, dy16), Catch::Contains("bias_backward: dbias is"));
  CHECK_THROWS_WITH(be.dropout_forward(y, x, 1.0, RngStream{}),
                    Catch::Contains("dropout probability 1 not in [0, 1)"));
  const int64_t heads = 2, hd = 4, s = 3;
  Tensor qkv = be.alloc({1, s, heads * 3 * hd}, DType::kF32);
  Tensor att = be.alloc({1, s, heads * hd}, DType::kF32);
  Tensor bad_stats = be.alloc({1, heads, s + 1}, DType::kF32);
  CHECK_THROWS_WITH(be.attention_forward(att, bad_stats, qkv, heads, 0.0, RngStream{}),
                    Catch::Contains("attention_forward: stats is"));
  AdamWArgs step0;
  step0.step = 0;
  CHECK_THROWS_WITH(be.adamw_update(w, b, dw, db, step0), Catch::Contains("step 0 (1-based)"));
  // The embeddings and the cross entropies, whole and vocab-parallel (their ids from data are
  // each device's to check, where the data is).
  Tensor tokens = be.alloc({1, s}, DType::kI32), targets = be.alloc({s}, DType::kI32);
  Tensor wte = be.alloc({10, c}, DType::kF32), wpe = be.alloc({s, c}, DType::kF32);
  Tensor emb_short = be.alloc({1, s, c - 1}, DType::kF32);
  CHECK_THROWS_WITH(be.embedding_shard_forward(emb_short, tokens, wte, Tensor(), 0),
                    Catch::Contains("embedding_shard_forward: out is"));
  CHECK_THROWS_WITH(be.embedding_forward(emb_short, tokens, wte, Tensor()),
                    Catch::Contains("embedding_forward: wpe is undefined"));
  Tensor logits10 = be.alloc({s, 10}, DType::kF32);
  CHECK_THROWS_WITH(be.cross_entropy_forward(logits10, targets, 11),
                    Catch::Contains("cross_entropy_forward: vocab 11"));
  Tensor row_max32 = be.alloc({s}, DType::kF32), stats64 = be.alloc({2, s}, DType::kF64);
  CHECK_THROWS_WITH(be.cross_entropy_shard_stats(stats64, logits10, targets, row_max32, 0, 10),
                    Catch::Contains("cross_entropy_shard_stats: row_max is"));
  (void)wpe;
  // The GEMMs: the dtype pairing (bf16 a with f32 b) and the shapes, also through a linear layer.
  Tensor a16 = be.alloc({n, c}, DType::kBF16), wt = be.alloc({c, c}, DType::kF32);
  CHECK_THROWS_WITH(be.gemm(y, a16, false, wt, true, 1.0, 0.0),
                    Catch::Contains("gemm: bf16 a needs bf16 b"));
  CHECK_THROWS_WITH(be.linear_bias_forward(y, x, wt, short_w, nullptr, Activation::kGelu),
                    Catch::Contains("add_bias: bias is"));
  Tensor w_wide = be.alloc({c, c + 1}, DType::kF32);
  CHECK_THROWS_WITH(be.gemm_weight(y, x, w_wide, true, 1.0, 0.0),
                    Catch::Contains("gemm_weight: c"));
  CHECK(be.ran.empty());

  // Within the contract, each reaches its implementation.
  be.layernorm_forward(y, mean, rstd, x, w, b, 1e-5);
  be.layernorm_backward(y, dw, db, x, x, w, mean, rstd);
  be.gelu_forward(y, x, Activation::kGelu);
  CHECK(be.ran ==
        std::vector<std::string>{"layernorm_forward", "layernorm_backward", "gelu_forward"});
}

namespace {
// An implementation that calls its own operation's front instead of Backend's default.
class SelfCallingBackend final : public test::StubBackend {
 protected:
  Tensor do_alloc(const Shape& shape, DType dtype) override { return Tensor::cpu(shape, dtype); }
  void do_scale(Tensor& x, double alpha) override { scale(x, alpha); }
};
}  // namespace

TEST_CASE("an implementation calling its own front is an error, not a stack overflow") {
  SelfCallingBackend be;
  Tensor x = be.alloc({4}, DType::kF32);
  CHECK_THROWS_WITH(be.scale(x, 2.0), Catch::Contains("the implementation of scale called scale"));
  // The CPU backend's rounded AdamW on a wide param takes Backend's default (do_, not the front).
  auto cpu = make_cpu_backend(1);
  Tensor p = cpu->alloc({4}, DType::kF32), master = cpu->alloc({4}, DType::kF32);
  Tensor g = cpu->alloc({4}, DType::kF32), m = cpu->alloc({4}, DType::kF32);
  Tensor v = cpu->alloc({4}, DType::kF32);
  cpu->fill(master, 1.0);
  cpu->fill(g, 0.5);
  AdamWArgs args;
  args.lr = 0.1;
  cpu->adamw_update_rounded(p, master, g, m, v, args);
  CHECK(p.data_as<float>()[0] == master.data_as<float>()[0]);
  CHECK(master.data_as<float>()[0] < 1.0f);
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

TEST_CASE("a copy of a tensor onto itself moves nothing and is not an operation") {
  auto be = make_cpu_backend(1);
  Recorder rec;
  be->set_op_hook(&rec);
  Tensor x = Tensor::cpu({3}, DType::kF32);
  be->copy(x, x);
  Tensor y = Tensor::cpu({3}, DType::kF32);
  be->copy(y, x);
  be->set_op_hook(nullptr);
  CHECK(rec.seen == std::vector<std::string>{"begin copy (copy)", "end copy"});
}

// Backend::capture's default (the CPU's): the calls recorded, not run; each replay runs them on
// what the tensors then hold.
TEST_CASE("capture on the CPU records without running - each replay runs the calls again") {
  auto be = make_cpu_backend(1);
  Tensor x = Tensor::cpu({2}, DType::kF64), y = Tensor::cpu({2}, DType::kF64);
  x.data_as<double>()[0] = 1.0;
  x.data_as<double>()[1] = 2.0;
  y.data_as<double>()[0] = 10.0;
  y.data_as<double>()[1] = 20.0;
  auto step = be->capture([&] { be->add(x, x, y); });
  CHECK(x.data_as<double>()[0] == 1.0);
  step->replay();
  step->replay();
  CHECK(x.data_as<double>()[0] == 21.0);
  CHECK(x.data_as<double>()[1] == 42.0);
  y.data_as<double>()[0] = 100.0;  // new input, as a replay's upload
  step->replay();
  CHECK(x.data_as<double>()[0] == 121.0);
}

// A recording holds memory by address; once its backend says that memory may have moved
// (invalidate_recordings, or on a GPU its own workspace growing) every recording made before is
// stale and its replay refused, so that no owner replays through freed memory by mistake.
TEST_CASE("a recording goes stale when its backend invalidates recordings - its replay refused") {
  auto be = make_cpu_backend(1);
  Tensor x = be->alloc({2}, DType::kF64);
  auto before = be->capture([&] { be->scale(x, 2.0); });
  const uint64_t epoch = be->recording_epoch();
  CHECK_FALSE(before->stale());
  be->invalidate_recordings();
  CHECK(be->recording_epoch() == epoch + 1);
  CHECK(before->stale());
  CHECK_THROWS_WITH(before->replay(), Catch::Contains("record it again"));
  auto after = be->capture([&] { be->scale(x, 2.0); });
  CHECK_FALSE(after->stale());
  after->replay();
}
