// CapturedAdamWStep (optim/captured_adamw_step.h) against AdamW's host step: the same weights,
// moments, masters and step count bit for bit, over steps whose learning rate, gradients, loss
// scale and clip change (a recording that kept any of them from its first step would drift), and
// the skip of a non-finite gradient or loss. On the CPU a replay runs the recorded calls again
// with the values captured when it recorded, as a CUDA graph would.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/kernels/adamw_math.h"
#include "optim/adamw.h"
#include "optim/captured_adamw_step.h"

using namespace mtnlg;

namespace {

// Shards and replicated parameters interleaved, so the norm's order (shards first) matters.
void add_params(ParamRegistry& reg) {
  reg.add({"a", {7}, {7}, -1, true, 0.0, 0.0});
  reg.add({"w1", {5, 3}, {5, 3}, 0, false, 0.0, 0.0});
  reg.add({"b", {3}, {3}, -1, true, 0.0, 0.0});
  reg.add({"w2", {4, 6}, {4, 6}, 1, false, 0.0, 0.0});
}

bool same_bits(const Tensor& x, const Tensor& y) {
  return x.nbytes() == y.nbytes() && std::memcmp(x.data(), y.data(), x.nbytes()) == 0;
}

// Gradients of step k: a magnitude that makes clipping act on some steps and not others.
void set_grads(ParamRegistry& reg, int k, double magnitude) {
  for (size_t p = 0; p < reg.params().size(); ++p) {
    Tensor& g = reg.params()[p].grad;
    for (int64_t i = 0; i < g.numel(); ++i)
      g.data_as<float>()[i] =
          static_cast<float>(magnitude * std::sin(0.37 * static_cast<double>(i + 11 * p + 7 * k)));
  }
}

struct Pair {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  OptimizerConfig cfg;
  ParamRegistry host_reg, dev_reg;
  std::unique_ptr<AdamW> host, dev;
  explicit Pair(DType values, double clip) {
    cfg.lr = 1e-2;
    cfg.weight_decay = 0.1;
    cfg.clip_grad = clip;
    for (ParamRegistry* reg : {&host_reg, &dev_reg}) {
      add_params(*reg);
      if (values == DType::kF32)
        reg->allocate(*be, DType::kF32);
      else
        reg->allocate(*be, values, DType::kF32);
      for (auto& p : reg->params()) {
        Tensor v = Tensor::cpu(p.value.shape(), DType::kF32);
        for (int64_t i = 0; i < v.numel(); ++i)
          v.data_as<float>()[i] = 0.25f * static_cast<float>(i % 5) - 0.5f;
        be->copy(p.value, v);
      }
    }
    host = std::make_unique<AdamW>(host_reg, *be, cfg);
    dev = std::make_unique<AdamW>(dev_reg, *be, cfg);
  }
  void check_equal() const {
    for (size_t p = 0; p < host_reg.params().size(); ++p) {
      CHECK(same_bits(host_reg.params()[p].value, dev_reg.params()[p].value));
      CHECK(same_bits(host->exp_avg()[p], dev->exp_avg()[p]));
      CHECK(same_bits(host->exp_avg_sq()[p], dev->exp_avg_sq()[p]));
    }
    for (size_t p = 0; p < host->masters().size(); ++p)
      CHECK(same_bits(host->masters()[p], dev->masters()[p]));
    CHECK(host->steps() == dev->steps());
  }
};

}  // namespace

TEST_CASE("a captured AdamW step equals the host's step bit for bit - lr and loss scale change") {
  const DType values = GENERATE(DType::kF32, DType::kBF16);
  const double clip = GENERATE(0.0, 1.0);
  Pair t(values, clip);
  CapturedAdamWStep step(*t.dev, t.dev_reg, *t.be);
  Tensor loss = t.be->alloc({1}, DType::kF64);
  for (int k = 0; k < 7; ++k) {
    const double lr = 1e-3 * (k + 1);                // a warmup: every step its own rate
    const double loss_scale = k < 4 ? 1.0 : 1024.0;  // fp16's scale grows mid-run
    const double magnitude = (k % 2 ? 0.01 : 3.0) * loss_scale;  // clipped on even steps
    set_grads(t.host_reg, k, magnitude);
    set_grads(t.dev_reg, k, magnitude);
    loss.data_as<double>()[0] = 2.5 + k;
    // The trainer's host path: the norm of the scaled gradients, unscaled, clipped.
    const double scaled_norm = global_grad_norm(*t.be, t.host_reg);
    const double grad_norm = scaled_norm / loss_scale;
    t.host->step(lr, clip_coefficient(grad_norm, clip) / loss_scale);

    const bool recorded = step.queue(lr, loss_scale, loss);
    CHECK(recorded == (k == 1));  // the first step plain, the second records, the rest replay
    const CapturedAdamWStep::Result r = step.finish();
    CHECK(r.updated);
    CHECK(r.loss == 2.5 + k);
    CHECK(std::sqrt(r.sum_squares) == scaled_norm);
    t.check_equal();
  }
  CHECK(step.recordings() == 1);
  CHECK(step.launches() == -1);  // the CPU's calls
}

TEST_CASE("a captured AdamW step skips a non-finite gradient or loss - nothing changes") {
  Pair t(DType::kBF16, 1.0);
  CapturedAdamWStep step(*t.dev, t.dev_reg, *t.be);
  Tensor loss = t.be->alloc({1}, DType::kF64);
  const double inf = std::numeric_limits<double>::infinity();
  for (int k = 0; k < 6; ++k) {
    set_grads(t.host_reg, k, 0.5);
    set_grads(t.dev_reg, k, 0.5);
    loss.data_as<double>()[0] = 1.0;
    if (k == 2) t.dev_reg.params()[1].grad.data_as<float>()[3] = static_cast<float>(inf);
    if (k == 4) loss.data_as<double>()[0] = std::nan("");
    const bool skip = k == 2 || k == 4;
    // The host's path skips these before updating (an fp16 overflow, or the divergence stop).
    if (!skip) {
      const double norm = global_grad_norm(*t.be, t.host_reg);
      t.host->step(0.01, clip_coefficient(norm, 1.0));
    }
    step.queue(0.01, 1.0, loss);
    const CapturedAdamWStep::Result r = step.finish();
    CHECK(r.updated == !skip);
    if (k == 2) CHECK(std::isinf(r.sum_squares));
    if (k == 4) CHECK(std::isnan(r.loss));
    t.check_equal();  // the skipped steps left weights, moments, masters and the count alone
  }
  CHECK(t.dev->steps() == 4);
}

TEST_CASE("the step words' operations on the CPU equal the host's values") {
  auto be = make_cpu_backend(2);
  std::vector<Tensor> xs;
  for (int n : {0, 1, 1000, 70000}) {
    Tensor x = be->alloc({n}, DType::kF32);
    for (int64_t i = 0; i < n; ++i) x.data_as<float>()[i] = std::cos(0.01f * static_cast<float>(i));
    xs.push_back(x);
  }
  Tensor sums = be->alloc({4}, DType::kF64);
  be->sum_squares_into(sums, xs);
  const std::vector<double> want = be->sum_squares_many(xs);
  for (size_t i = 0; i < want.size(); ++i) CHECK(sums.data_as<double>()[i] == want[i]);

  Tensor words = be->alloc({AdamWStepWords::kCount}, DType::kF64);
  Tensor loss = be->alloc({1}, DType::kF64);
  loss.data_as<double>()[0] = 7.0;
  double* w = words.data_as<double>();
  w[AdamWStepWords::kLossScale] = 8.0;
  be->grad_clip_words(words, sums, 2, loss, 1.0);
  const double total = (want[0] + want[1]) + (want[2] + want[3]);
  CHECK(w[AdamWStepWords::kSumSquares] == total);
  CHECK(w[AdamWStepWords::kGradScale] == clip_coefficient(std::sqrt(total) / 8.0, 1.0) / 8.0);
  CHECK(w[AdamWStepWords::kSkip] == 0.0);
  CHECK(w[AdamWStepWords::kLoss] == 7.0);

  Tensor short_words = be->alloc({4}, DType::kF64);
  CHECK_THROWS_WITH(be->grad_clip_words(short_words, sums, 2, loss, 1.0), Catch::Contains("words"));
  CHECK_THROWS_WITH(be->grad_clip_words(words, sums, 5, loss, 1.0), Catch::Contains("5 first"));
}

TEST_CASE("a captured AdamW step records again after its recording went stale - the same bits") {
  Pair t(DType::kBF16, 1.0);
  CapturedAdamWStep step(*t.dev, t.dev_reg, *t.be);
  Tensor loss = t.be->alloc({1}, DType::kF64);
  std::vector<bool> recorded;
  for (int k = 0; k < 6; ++k) {
    set_grads(t.host_reg, k, 2.0);
    set_grads(t.dev_reg, k, 2.0);
    const double norm = global_grad_norm(*t.be, t.host_reg);
    t.host->step(1e-3 * (k + 1), clip_coefficient(norm, 1.0));
    // As an evaluation does: what the recording holds may have moved.
    if (k == 3) t.be->invalidate_recordings();
    recorded.push_back(step.queue(1e-3 * (k + 1), 1.0, loss));
    CHECK(step.finish().updated);
    t.check_equal();
  }
  // Plain at 0, recorded at 1, replayed; stale at 3: plain again, recorded at 4.
  CHECK(recorded == std::vector<bool>{false, true, false, false, true, false});
  CHECK(step.recordings() == 2);
}
