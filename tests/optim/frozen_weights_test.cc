// Frozen-weights windows (core/backend.h) around each iteration's micro-batches, as the trainer
// opens them: the CPU backend keeps each bf16 weight's oneDNN blocked copy through the window
// and must drop it before the optimizer changes the weight. Training with windows must be bit
// for bit training without them; a copy kept across a step would change the next losses.
#include <catch2/catch.hpp>

#include <optional>
#include <vector>

#include "model/gpt_stage.h"
#include "optim/optimizer.h"
#include "test_util.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

// The tests' tiny GPT with dropout, whose masks the windows must not disturb either.
GPTConfig config() {
  GPTConfig c = test::tiny_gpt(2);
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.1;
  return c;
}

// Three AdamW iterations of two micro-batches; with `frozen`, each iteration's forward and
// backward passes run inside a frozen-weights window (core/backend.h), as the trainer runs
// them. Returns the losses, then every weight's bits.
std::vector<double> train_steps(GPTConfig c, bool frozen, std::vector<std::vector<uint16_t>>& w) {
  auto backend = make_cpu_backend(1);
  GPTStage stage(c, full_model(c), *backend, DType::kBF16, 1234);
  stage.init_weights(99);
  OptimizerConfig oc;
  oc.lr = 1e-2;  // large steps: a weight copy kept past a step would show in the next loss
  auto optimizer = make_optimizer(stage.params(), *backend, oc, nullptr, nullptr, nullptr);
  StageActivations acts = stage.make_activations(2);
  std::vector<double> losses;
  for (int it = 0; it < 3; ++it) {
    stage.params().zero_grads(*backend);
    double loss = 0.0;
    {
      std::optional<FrozenWeights> window;
      if (frozen) window.emplace(*backend);
      for (int m = 0; m < 2; ++m) {
        loss += stage.forward(acts, test::token_ids(2, c.seq, c.vocab, m + it),
                              test::token_ids(2, c.seq, c.vocab, m + 7), static_cast<uint64_t>(m));
        stage.backward(acts, Tensor(), 1.0 / 128.0);
      }
    }
    losses.push_back(loss);
    optimizer->step(oc.lr, 1.0);
  }
  for (const auto& p : stage.params().params()) {
    const auto* bits = static_cast<const uint16_t*>(p.value.data());
    w.emplace_back(bits, bits + p.value.numel());
  }
  return losses;
}

}  // namespace

TEST_CASE("bf16 frozen-weights windows give bitwise identical training", "[bf16]") {
  GPTConfig c = config();
  c.activation_checkpointing = GENERATE(false, true);
  INFO("activation checkpointing " << c.activation_checkpointing);
  std::vector<std::vector<uint16_t>> plain_w, frozen_w;
  const std::vector<double> plain = train_steps(c, false, plain_w);
  const std::vector<double> frozen = train_steps(c, true, frozen_w);
  CHECK(plain == frozen);
  CHECK(plain_w == frozen_w);
  CHECK(plain[2] != plain[0]);  // the weights moved between iterations
}

}  // namespace mtnlg
