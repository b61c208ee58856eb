// model/loss_sum.h: a step's loss summed where the backend makes it and read once has the bits
// of the micro-batches' returned losses added in order on the host, on every kind of last stage
// (whole model, pipeline's last, vocab-parallel is covered by tensor_parallel_stage_test).
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "model/gpt_params.h"
#include "model/gpt_stage.h"
#include "model/loss_sum.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

constexpr int64_t kBatch = 2, kSeq = 8;

Tensor random_f32(std::mt19937& gen, int64_t hidden) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor t = Tensor::cpu({kBatch, kSeq, hidden}, DType::kF32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = normal(gen);
  return t;
}

TEST_CASE("a LossSum over micro-batches equals the returned losses added on the host") {
  GPTConfig c = test::tiny_gpt(2);
  c.init_std = 0.2;
  c.hidden_dropout = 0.1;
  const std::vector<StageSpec> stages = {full_model(c), {1, 2, false, true}, {0, 1, true, false}};
  for (const StageSpec& spec : stages) {
    INFO("stage from layer " << spec.first_layer << " first " << spec.pre_process << " last "
                             << spec.post_process);
    auto be = make_cpu_backend(1);
    GPTStage model(c, spec, *be, DType::kF32, 5);
    model.init_weights(3);
    StageActivations acts = model.make_activations(kBatch);
    LossSum sum(*be);
    for (int step = 0; step < 2; ++step) {
      double want = 0.0;
      std::mt19937 gen(static_cast<unsigned>(7 + step));
      for (int micro = 0; micro < 3; ++micro) {
        const Tensor input = spec.pre_process
                                 ? test::token_ids(kBatch, kSeq, c.vocab, 10 * step + micro)
                                 : random_f32(gen, c.hidden);
        const Tensor targets = test::token_ids(kBatch, kSeq, c.vocab, 100 + 10 * step + micro);
        const auto id = static_cast<uint64_t>(3 * step + micro);
        want += model.forward(acts, input, targets, id);
        model.forward(acts, input, targets, id, sum);  // the same micro-batch again
      }
      const double got = sum.take(*be);
      CHECK(got == want);  // bit for bit
      CHECK((got > 0.0) == spec.post_process);
      CHECK(sum.take(*be) == 0.0);  // take leaves zero
    }
  }
}

TEST_CASE("a LossSum adds host losses as they come - the vocab-parallel path") {
  auto be = make_cpu_backend(1);
  LossSum sum(*be);
  sum.add_on_host(0.1);
  sum.add_on_host(0.2);
  CHECK(sum.take(*be) == 0.1 + 0.2);
  CHECK(sum.take(*be) == 0.0);
}

}  // namespace
}  // namespace mtnlg
