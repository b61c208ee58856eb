// The whole GPT stage's explicit backward against central finite differences in float64, with
// dropout on and activation checkpointing on and off; plus checkpointing's bitwise equality, the
// padded vocabulary rows, init statistics and the parameter count.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "model/gpt_params.h"
#include "model/gpt_stage.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

constexpr int64_t kBatch = 2;
constexpr uint64_t kMicroBatch = 7;  // selects the dropout masks: the same in every evaluation

GPTConfig tiny(bool checkpointing) {
  GPTConfig c = test::tiny_gpt(2);
  c.init_std = 0.2;  // large enough that attention is far from uniform and GeLU is nonlinear
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.1;
  c.activation_checkpointing = checkpointing;
  return c;
}

struct Batch {
  Tensor tokens = Tensor::cpu({kBatch, 8}, DType::kI32);
  Tensor targets = Tensor::cpu({kBatch, 8}, DType::kI32);
  Batch() {
    std::mt19937 gen(42);
    for (int64_t i = 0; i < tokens.numel(); ++i) {
      tokens.data_as<int32_t>()[i] = static_cast<int32_t>(gen() % 50);
      targets.data_as<int32_t>()[i] = static_cast<int32_t>(gen() % 50);
    }
  }
};

// A model whose every parameter (biases and LayerNorms too) is random, so every path carries
// gradient. Same weights for any `checkpointing`.
std::unique_ptr<GPTStage> make_model(Backend& be, bool checkpointing) {
  const GPTConfig c = tiny(checkpointing);
  auto m = std::make_unique<GPTStage>(c, full_model(c), be, DType::kF64, 5);
  m->init_weights(3);
  std::mt19937 gen(9);
  std::normal_distribution<double> noise(0.0, 0.1);
  for (Param& p : m->params().params()) {
    if (p.spec.init_std > 0) continue;
    double* v = p.value.data_as<double>();
    for (int64_t i = 0; i < p.value.numel(); ++i) v[i] += noise(gen);
  }
  return m;
}

// Mean loss over the batch's tokens.
double loss(GPTStage& m, StageActivations& acts, const Batch& b) {
  return m.forward(acts, b.tokens, b.targets, kMicroBatch) / static_cast<double>(b.tokens.numel());
}

void forward_backward(GPTStage& m, StageActivations& acts, const Batch& b) {
  m.params().zero_grads(m.backend());
  loss(m, acts, b);
  m.backward(acts, Tensor(), 1.0 / static_cast<double>(b.tokens.numel()));
}

TEST_CASE("gradients match central finite differences (dropout on - checkpointing off and on)") {
  auto be = make_cpu_backend(1);
  const Batch batch;
  for (bool ckpt : {false, true}) {
    INFO("activation checkpointing " << ckpt);
    auto m = make_model(*be, ckpt);
    StageActivations acts = m->make_activations(kBatch);
    forward_backward(*m, acts, batch);

    std::mt19937 gen(123);
    const double eps = 1e-5;
    double worst = 0.0;
    int checked = 0;
    for (Param& p : m->params().params()) {
      std::vector<int64_t> idx;
      if (p.spec.name == layer_param(0, "self_attention.query_key_value.bias")) {
        for (int64_t i = 0; i < p.value.numel(); ++i)
          idx.push_back(i);  // every q, k, v of both heads
      } else {
        // Word embeddings: real rows only (the padded ones are checked exactly below).
        const int64_t n =
            p.spec.name == "embedding.word_embeddings.weight" ? 50 * 16 : p.value.numel();
        for (int k = 0; k < 5; ++k) idx.push_back(static_cast<int64_t>(gen() % n));
      }
      double* v = p.value.data_as<double>();
      const double* g = p.grad.data_as<double>();
      for (int64_t i : idx) {
        const double saved = v[i];
        v[i] = saved + eps;
        const double up = loss(*m, acts, batch);
        v[i] = saved - eps;
        const double down = loss(*m, acts, batch);
        v[i] = saved;
        const double fd = (up - down) / (2 * eps);
        // Truncation ~eps^2 and round-off ~1e-16 / eps put the finite difference within ~1e-10.
        const double tol = 1e-8 + 1e-6 * std::abs(fd);
        INFO(p.spec.name << "[" << i << "]: analytic " << g[i] << " finite difference " << fd);
        CHECK(std::abs(g[i] - fd) <= tol);
        worst = std::max(worst, std::abs(g[i] - fd));
        ++checked;
      }
    }
    CHECK(checked == 27 * 5 + 48);
    WARN("checkpointing " << ckpt << ": " << checked << " elements, worst |analytic - fd| "
                          << worst);
  }
}

TEST_CASE("activation checkpointing gives bitwise identical loss and gradients") {
  auto be = make_cpu_backend(1);
  const Batch batch;
  auto plain = make_model(*be, false);
  auto ckpt = make_model(*be, true);
  StageActivations a1 = plain->make_activations(kBatch);
  StageActivations a2 = ckpt->make_activations(kBatch);
  for (int step = 0; step < 2; ++step) {  // grads accumulate over two micro-batches
    const double l1 = plain->forward(a1, batch.tokens, batch.targets, kMicroBatch + step);
    const double l2 = ckpt->forward(a2, batch.tokens, batch.targets, kMicroBatch + step);
    CHECK(std::memcmp(&l1, &l2, sizeof(double)) == 0);
    plain->backward(a1, Tensor(), 0.0625);
    ckpt->backward(a2, Tensor(), 0.0625);
  }
  for (size_t i = 0; i < plain->params().params().size(); ++i) {
    const Param& p = plain->params().params()[i];
    const Param& q = ckpt->params().params()[i];
    INFO(p.spec.name);
    CHECK(std::memcmp(p.grad.data(), q.grad.data(), p.grad.nbytes()) == 0);
  }
}

TEST_CASE("padded vocabulary rows get exactly zero gradient") {
  auto be = make_cpu_backend(1);
  const Batch batch;
  auto m = make_model(*be, false);
  StageActivations acts = m->make_activations(kBatch);
  forward_backward(*m, acts, batch);
  const Param& wte = m->params().get("embedding.word_embeddings.weight");
  const double* g = wte.grad.data_as<double>();
  for (int64_t i = 50 * 16; i < 64 * 16; ++i) REQUIRE(g[i] == 0.0);
  double real = 0.0;
  for (int64_t i = 0; i < 50 * 16; ++i) real += std::abs(g[i]);
  CHECK(real > 0.0);
}

GPTConfig init_config() {
  GPTConfig c;
  c.num_layers = 4;
  c.hidden = 64;
  c.heads = 4;
  c.ffn = 256;
  c.seq = 16;
  c.max_positions = 128;
  c.vocab = 1000;
  c.padded_vocab = 1024;
  c.init_std = 0.02;
  return c;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST_CASE("init_weights follows the init rules and is a function of the seed") {
  auto be = make_cpu_backend(1);
  const GPTConfig c = init_config();
  GPTStage a(c, full_model(c), *be, DType::kF64, 1);
  a.init_weights(17);
  const double out_std = 0.02 / std::sqrt(2.0 * 4);
  for (const Param& p : a.params().params()) {
    const std::string& name = p.spec.name;
    INFO(name);
    const double* v = p.value.data_as<double>();
    const int64_t n = p.value.numel();
    const bool layernorm = name.find("layernorm") != std::string::npos;
    if (layernorm && ends_with(name, ".weight")) {
      for (int64_t i = 0; i < n; ++i) REQUIRE(v[i] == 1.0);
    } else if (ends_with(name, ".bias")) {
      for (int64_t i = 0; i < n; ++i) REQUIRE(v[i] == 0.0);
    } else {
      const bool output = ends_with(name, "self_attention.dense.weight") ||
                          ends_with(name, "mlp.dense_4h_to_h.weight");
      const double want = output ? out_std : 0.02;
      double sum = 0.0, sq = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        sum += v[i];
        sq += v[i] * v[i];
      }
      const double mean = sum / static_cast<double>(n);
      const double std = std::sqrt(sq / static_cast<double>(n) - mean * mean);
      // n >= 4096: the sample std is within ~1.1% of the truth (1 sigma), the mean within
      // std/64; 5% and 5 sigma never flake and still catch a wrong rule (sqrt(8) apart).
      CHECK(std::abs(std / want - 1.0) < 0.05);
      CHECK(std::abs(mean) < 5.0 * want / std::sqrt(static_cast<double>(n)));
    }
  }

  GPTStage b(c, full_model(c), *be, DType::kF64, 1);
  b.init_weights(17);
  GPTStage d(c, full_model(c), *be, DType::kF64, 1);
  d.init_weights(18);
  for (size_t i = 0; i < a.params().params().size(); ++i) {
    const Param& p = a.params().params()[i];
    INFO(p.spec.name);
    CHECK(std::memcmp(p.value.data(), b.params().params()[i].value.data(), p.value.nbytes()) == 0);
    if (p.spec.init_std > 0)
      CHECK(std::memcmp(p.value.data(), d.params().params()[i].value.data(), p.value.nbytes()) !=
            0);
  }
}

TEST_CASE("parameter count of the GPT-2 124M shape") {
  GPTConfig c;
  c.num_layers = 12;
  c.hidden = 768;
  c.heads = 12;
  c.ffn = 3072;
  c.seq = 1024;
  c.max_positions = 1024;
  c.vocab = 50257;
  c.padded_vocab = 50304;
  // By hand: wte 50304*768 + wpe 1024*768 + final LN 2*768, and per layer two LNs (4*768),
  // QKV 768*2304 + 2304, dense 768*768 + 768, fc1 768*3072 + 3072, fc2 3072*768 + 768.
  const int64_t per_layer =
      4 * 768 + (768 * 2304 + 2304) + (768 * 768 + 768) + (768 * 3072 + 3072) + (3072 * 768 + 768);
  const int64_t total = 50304 * 768 + 1024 * 768 + 2 * 768 + 12 * per_layer;
  CHECK(per_layer == 7087872);
  CHECK(total == 124475904);
  // Hugging Face's count for gpt2 (vocab 50257) plus our 47 padded rows.
  CHECK(total == 124439808 + 47 * 768);
  CHECK(gpt_parameter_count(c) == total);
}

}  // namespace
}  // namespace mtnlg
