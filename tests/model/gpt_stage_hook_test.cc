// GPTStage::backward's GradReadyHook: on every kind of pipeline stage each parameter is reported
// exactly once, its gradient already final when reported (bitwise what backward leaves), the
// layers last first; what parallel/grad_sync.h's overlapped reduction relies on.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "model/gpt_params.h"
#include "model/gpt_stage.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

constexpr int64_t kBatch = 2, kSeq = 8;

GPTConfig tiny() {
  GPTConfig c = test::tiny_gpt(3);
  static_assert(kSeq == 8, "tiny_gpt's sequence");
  c.init_std = 0.2;
  c.hidden_dropout = 0.1;
  c.attention_dropout = 0.1;
  return c;
}

Tensor random_i32(std::mt19937& gen) {
  Tensor t = Tensor::cpu({kBatch, kSeq}, DType::kI32);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data_as<int32_t>()[i] = static_cast<int32_t>(gen() % 50);
  return t;
}

Tensor random_f32(std::mt19937& gen, int64_t hidden) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor t = Tensor::cpu({kBatch, kSeq, hidden}, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = normal(gen);
  return t;
}

// The layer number of a "layers.<i>." name, -1 for the others.
int64_t layer_of(const std::string& name) {
  if (name.rfind("layers.", 0) != 0) return -1;
  return std::stoll(name.substr(7));
}

TEST_CASE("the grad-ready hook reports every parameter once - final - last layers first") {
  const GPTConfig c = tiny();
  const std::vector<StageSpec> stages = {
      full_model(c), {0, 1, true, false}, {1, 2, false, false}, {2, 3, false, true}};
  for (const StageSpec& spec : stages) {
    INFO("stage layers [" << spec.first_layer << ", " << spec.last_layer << ") first "
                          << spec.pre_process << " last " << spec.post_process);
    auto be = make_cpu_backend(1);
    GPTStage model(c, spec, *be, DType::kF32, 5);
    model.init_weights(3);
    std::mt19937 gen(11);
    StageActivations acts = model.make_activations(kBatch);
    std::vector<std::string> order;
    std::map<std::string, std::vector<float>> at_report;
    const GradReadyHook hook = [&](const Param& p) {
      order.push_back(p.spec.name);
      const float* g = p.grad.data_as<float>();
      at_report[p.spec.name].assign(g, g + p.grad.numel());
    };
    // Two micro-batches accumulate; the hook is set on the last one only, as the trainer does.
    for (int micro = 0; micro < 2; ++micro) {
      const Tensor input = spec.pre_process ? random_i32(gen) : random_f32(gen, c.hidden);
      const Tensor targets = random_i32(gen);
      const Tensor doutput = spec.post_process ? Tensor() : random_f32(gen, c.hidden);
      model.forward(acts, input, targets, static_cast<uint64_t>(micro));
      model.backward(acts, doutput, 0.01, micro == 1 ? hook : GradReadyHook());
    }
    REQUIRE(order.size() == model.params().params().size());
    REQUIRE(at_report.size() == order.size());  // no name twice
    for (const Param& p : model.params().params()) {
      INFO(p.spec.name);
      const std::vector<float>& seen = at_report.at(p.spec.name);
      REQUIRE(std::memcmp(seen.data(), p.grad.data(), seen.size() * sizeof(float)) == 0);
      bool nonzero = false;
      for (float v : seen) nonzero |= v != 0.0f;
      CHECK(nonzero);  // a real gradient, so "unchanged after the report" means something
    }
    // Layers in decreasing order, each layer's parameters together.
    int64_t previous = spec.last_layer;
    for (const std::string& name : order) {
      const int64_t layer = layer_of(name);
      if (layer < 0) continue;
      INFO(name);
      CHECK(layer <= previous);
      previous = layer;
    }
    if (spec.post_process) CHECK(order.front() == "final_layernorm.weight");
    if (spec.pre_process) CHECK(order.back() == "embedding.word_embeddings.weight");
  }
}

}  // namespace
}  // namespace mtnlg
