// A GPTStage in bf16 or fp16 (bf16/fp16 weights and activations, fp32 LayerNorm statistics, softmax
// and loss, fp32 main gradients) against the same model in f64 from the same (bf16) weights, and
// bf16 over tensor-parallel ranks against bf16 on one.
//
// The bands. Every tensor a bf16 layer stores is rounded once, a relative error of at most
// u = 2^-8 per element, with random sign across elements. A token's loss sees about r = 12
// roundings per layer on its path (LayerNorm out, qkv, probs, attention out, dense out, residual,
// LayerNorm out, fc1, GeLU, fc2, residual, logits), so its relative error is ~ u * sqrt(r * L),
// and the mean over n tokens averages the independent parts: for L = 2, n = 128 the mean loss
// is within u * sqrt(24) / sqrt(128) * |loss| ~ 2e-3 |loss|, and a systematic bias is bounded
// by u. The band is u = 3.9e-3 relative. Gradients are sums over tokens of products of
// such tensors; their relative L2 error is ~ u * sqrt(2 r L) ~ 3e-2: the band is 8u = 3.1e-2 of
// the f64 gradient's norm, per parameter, with a floor of 1e-6 absolute for tiny ones.
#include <catch2/catch.hpp>

#include <cmath>

#include "model/gpt_params.h"
#include "model/gpt_stage.h"
#include "parallel/gloo_communicator.h"
#include "parallel/store.h"
#include "test_util.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

// Unit roundoff: bf16 2^-8 (8 significant bits), fp16 2^-11 (11).
double unit(DType d) {
  return d == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048;
}

GPTConfig config() {
  GPTConfig c;
  c.num_layers = 2;
  c.hidden = 64;
  c.heads = 4;
  c.ffn = 256;
  c.seq = 32;
  c.max_positions = 32;
  c.vocab = 120;
  c.padded_vocab = 128;
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.1;
  return c;
}

struct Run {
  double loss = 0.0;
  std::vector<std::vector<double>> grads;  // per parameter, local elements (fp32 or f64)
  std::vector<ParamSpec> specs;
};

// Two micro-batches of 2 sequences, forward and backward. `weights`: a bf16 stage whose values
// this stage copies (so the f64 run starts from exactly the bf16 weights).
Run run(GPTConfig c, DType dtype, Communicator* tensor, GPTStage* weights = nullptr) {
  if (tensor != nullptr) {
    c.tp_size = tensor->size();
    c.tp_rank = tensor->rank();
  }
  auto backend = make_cpu_backend(1);
  GPTStage stage(c, full_model(c), *backend, dtype, 1234, tensor);
  stage.init_weights(99);
  if (weights != nullptr)
    for (size_t i = 0; i < stage.params().params().size(); ++i)
      backend->copy(stage.params().params()[i].value, weights->params().params()[i].value);
  StageActivations acts = stage.make_activations(2);
  Run r;
  for (int m = 0; m < 2; ++m) {
    r.loss += stage.forward(acts, test::token_ids(2, c.seq, c.vocab, m),
                            test::token_ids(2, c.seq, c.vocab, m + 7), static_cast<uint64_t>(m));
    stage.backward(acts, Tensor(), 1.0 / 128.0);
  }
  for (const auto& p : stage.params().params()) {
    REQUIRE(p.grad.dtype() == acc_dtype(dtype));  // fp32 main gradients under bf16
    std::vector<double> g(static_cast<size_t>(p.grad.numel()));
    for (int64_t i = 0; i < p.grad.numel(); ++i)
      g[i] = dtype == DType::kF64 ? p.grad.data_as<double>()[i] : p.grad.data_as<float>()[i];
    r.grads.push_back(std::move(g));
    r.specs.push_back(p.spec);
  }
  return r;
}

// Relative L2 distance of a parameter's gradient from the reference's (global indices).
double grad_error(const Run& got, const Run& ref, size_t p) {
  double diff = 0.0, norm = 0.0;
  for (size_t i = 0; i < got.grads[p].size(); ++i) {
    const double want =
        ref.grads[p][static_cast<size_t>(global_index(got.specs[p], static_cast<int64_t>(i)))];
    diff += (got.grads[p][i] - want) * (got.grads[p][i] - want);
    norm += want * want;
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-6);
}

TEST_CASE("a bf16 or fp16 stage follows f64 from the same weights within its format's band",
          "[bf16]") {
  const DType dt = GENERATE(DType::kBF16, DType::kF16);
  const double kU = unit(dt);
  INFO(dtype_name(dt));
  const GPTConfig c = config();
  auto backend = make_cpu_backend(1);
  GPTStage weights(c, full_model(c), *backend, dt, 1234);
  weights.init_weights(99);
  const Run bf = run(c, dt, nullptr);
  const Run ref = run(c, DType::kF64, nullptr, &weights);
  INFO("loss " << bf.loss << ", f64 " << ref.loss);
  CHECK(std::abs(bf.loss - ref.loss) <= kU * std::abs(ref.loss));
  double worst = 0.0;
  for (size_t p = 0; p < bf.specs.size(); ++p) {
    const double e = grad_error(bf, ref, p);
    INFO(bf.specs[p].name << ": relative gradient error " << e);
    CHECK(e <= 8 * kU);
    worst = std::max(worst, e);
  }
  WARN("worst relative gradient error " << worst << ", loss error "
                                        << std::abs(bf.loss - ref.loss) / ref.loss);
}

TEST_CASE("bf16 activation checkpointing gives bitwise identical loss and gradients", "[bf16]") {
  GPTConfig c = config();
  const Run plain = run(c, DType::kBF16, nullptr);
  c.activation_checkpointing = true;
  const Run recomputed = run(c, DType::kBF16, nullptr);
  CHECK(plain.loss == recomputed.loss);
  for (size_t p = 0; p < plain.grads.size(); ++p) {
    INFO(plain.specs[p].name);
    CHECK(plain.grads[p] == recomputed.grads[p]);
  }
}

TEST_CASE("bf16 or fp16 over 2 tensor-parallel ranks follows one rank", "[bf16]") {
  const DType dt = GENERATE(DType::kBF16, DType::kF16);
  const double kU = unit(dt);
  INFO(dtype_name(dt));
  const GPTConfig c = config();
  const Run one = run(c, dt, nullptr);
  MemoryStore store;
  std::vector<Run> results(2);
  test::run_ranks(2, [&](int rank) {
    auto tensor =
        make_gloo_communicator(store, "tensor", rank, {0, 1}, std::chrono::milliseconds(20000));
    results[rank] = run(c, dt, tensor.get());
  });
  // Both are within the band of the exact result; their distance is within twice of it.
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    CHECK(std::abs(results[rank].loss - one.loss) <= 2 * kU * std::abs(one.loss));
    CHECK(results[rank].loss == results[0].loss);  // the loss is all-reduced: one number
    for (size_t p = 0; p < one.specs.size(); ++p) {
      INFO(one.specs[p].name);
      CHECK(grad_error(results[rank], one, p) <= 16 * kU);
    }
  }
}

}  // namespace
}  // namespace mtnlg
