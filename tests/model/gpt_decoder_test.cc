// GPTDecoder (model/gpt_decoder.h): the logits its key/value cache gives at every position are
// the training forward pass's (GPTStage) over the same prefix, whether the tokens come one at a
// time, as one prompt or in chunks; and what it refuses.
#include "model/gpt_decoder.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "core/status.h"
#include "test_util.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

// The training forward's logits of row `pos` of batch row 0, real vocabulary only.
std::vector<float> forward_logits(GPTStage& model, const Tensor& tokens, int64_t pos) {
  StageActivations acts = model.make_activations(1);
  model.forward(acts, tokens, tokens, 0);  // targets: any ids; only the logits are read
  const float* l = acts.logits.data_as<float>() + pos * model.config().padded_vocab;
  return std::vector<float>(l, l + model.config().vocab);
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - double(b[i])));
  return d;
}

// Three layers, 12 positions, weights far from uniform (so a wrong cache shows), in evaluation
// mode, in `dtype` (the same weights rounded).
GPTConfig decoder_config(Activation act = Activation::kGelu) {
  GPTConfig c = test::tiny_gpt(3);
  c.seq = 12;
  c.max_positions = 12;
  c.init_std = 0.2;
  c.activation = act;
  return c;
}

std::unique_ptr<GPTStage> decoder_model(const GPTConfig& c, Backend& backend, DType dtype) {
  auto model = std::make_unique<GPTStage>(c, full_model(c), backend, dtype, 5);
  model->init_weights(5);
  model->set_training(false);
  return model;
}

TEST_CASE("cached decoding gives the full forward's logits at every position") {
  const GPTConfig c = decoder_config(GENERATE(Activation::kGelu, Activation::kGeluTanh));
  auto backend = make_cpu_backend(1);
  const auto owned = decoder_model(c, *backend, DType::kF32);
  GPTStage& model = *owned;
  const Tensor tokens = test::token_ids(1, c.seq, c.vocab, 3);
  const int32_t* ids = tokens.data_as<int32_t>();

  // One token at a time, a whole prompt, and chunks of 5 + 7 end at the same logits.
  GPTDecoder one(model, c.seq);
  std::vector<std::vector<float>> stepwise;
  for (int64_t p = 0; p < c.seq; ++p) stepwise.push_back(one.feed({ids + p, 1}));
  CHECK(one.position() == c.seq);

  double worst = 0, scale = 0;
  for (int64_t p = 0; p < c.seq; ++p) {
    // A forward over the prefix [0, p] alone: later tokens must not matter (causality).
    Tensor prefix = Tensor::cpu({1, c.seq}, DType::kI32);
    for (int64_t t = 0; t < c.seq; ++t)
      prefix.data_as<int32_t>()[t] = t <= p ? ids[t] : static_cast<int32_t>((t * 7) % c.vocab);
    const std::vector<float> want = forward_logits(model, prefix, p);
    worst = std::max(worst, max_diff(stepwise[static_cast<size_t>(p)], want));
    for (float v : want) scale = std::max(scale, double(std::abs(v)));
  }
  INFO("max |cached - forward| " << worst << " of logits up to " << scale);
  CHECK(scale > 0.5);
  CHECK(worst <= 1e-5 * scale);

  GPTDecoder whole(model, c.seq);
  CHECK(max_diff(whole.feed({ids, static_cast<size_t>(c.seq)}), stepwise.back()) <= 1e-5 * scale);
  GPTDecoder chunks(model, c.seq);
  chunks.feed({ids, 5});
  CHECK(max_diff(chunks.feed({ids + 5, 7}), stepwise.back()) <= 1e-5 * scale);
  // reset() starts a new sequence in the same cache.
  chunks.reset();
  CHECK(max_diff(chunks.feed({ids, 1}), stepwise.front()) <= 1e-5 * scale);
  // feed_rows: the logits of every row from the fourth on, in one call (a continuation scored).
  chunks.reset();
  const std::vector<float> rows = chunks.feed_rows({ids, static_cast<size_t>(c.seq)}, 3);
  REQUIRE(static_cast<int64_t>(rows.size()) == (c.seq - 3) * c.vocab);
  for (int64_t p = 3; p < c.seq; ++p) {
    const std::vector<float> row(rows.begin() + (p - 3) * c.vocab,
                                 rows.begin() + (p - 2) * c.vocab);
    CHECK(max_diff(row, stepwise[static_cast<size_t>(p)]) <= 1e-5 * scale);
  }
}

TEST_CASE("the decoder refuses overflow, bad ids and models it cannot run") {
  GPTConfig c = test::tiny_gpt(1);
  auto backend = make_cpu_backend(1);
  GPTStage model(c, full_model(c), *backend, DType::kF32, 1);
  model.init_weights(1);
  CHECK_THROWS_AS(GPTDecoder(model, c.max_positions + 1), Error);
  GPTDecoder d(model, 4);
  const std::vector<int32_t> five = {1, 2, 3, 4, 5};
  try {
    d.feed(five);
    FAIL("accepted 5 tokens into a cache of 4");
  } catch (const Error& e) {
    CHECK(e.context() == "--max-new-tokens");
  }
  const std::vector<int32_t> bad = {static_cast<int32_t>(c.vocab)};
  CHECK_THROWS_WITH(d.feed(bad), Catch::Contains("outside the vocabulary"));
  // A pipeline stage is not a whole model.
  GPTStage half(c, StageSpec{0, 1, true, false}, *backend, DType::kF32, 1);
  CHECK_THROWS_WITH(GPTDecoder(half, 4), Catch::Contains("whole model"));
  // The host cache is f32 on the CPU; other models take the device cache.
  GPTStage f64(c, full_model(c), *backend, DType::kF64, 1);
  CHECK_THROWS_WITH(GPTDecoder(f64, 4, DecoderAttention::kHost), Catch::Contains("f32"));
  CHECK(GPTDecoder(f64, 4).device_attention());
  CHECK_FALSE(GPTDecoder(model, 4).device_attention());
}

// The device cache (every row's q, k, v on the backend, the causal kernel over the whole cached
// sequence: how a GPU, bf16 or fp16 model decodes) against the host cache, token by token and in
// chunks: f32 and f64 to float32 rounding, bf16 and fp16 within their rounding.
TEST_CASE("the device attention cache decodes as the host cache - f32, f64, bf16, fp16") {
  const GPTConfig c = decoder_config();
  auto backend = make_cpu_backend(1);
  const auto model = decoder_model(c, *backend, DType::kF32);
  const Tensor tokens = test::token_ids(1, c.seq, c.vocab, 3);
  const int32_t* ids = tokens.data_as<int32_t>();
  GPTDecoder host(*model, c.seq);
  std::vector<std::vector<float>> want;
  for (int64_t p = 0; p < c.seq; ++p) want.push_back(host.feed({ids + p, 1}));
  double scale = 0;
  for (const auto& w : want)
    for (float v : w) scale = std::max(scale, double(std::abs(v)));

  struct Case {
    DType dtype;
    double tolerance;  // of the largest logit
  };
  const Case k = GENERATE(Case{DType::kF32, 1e-5}, Case{DType::kF64, 1e-5},
                          Case{DType::kBF16, 0.05}, Case{DType::kF16, 0.01});
  INFO("dtype " << dtype_name(k.dtype));
  const auto m = decoder_model(c, *backend, k.dtype);  // the same weights, rounded
  GPTDecoder dev(*m, c.seq, DecoderAttention::kDevice);
  REQUIRE(dev.device_attention());
  double worst = 0;
  for (int64_t p = 0; p < 5; ++p)
    worst = std::max(worst, max_diff(dev.feed({ids + p, 1}), want[static_cast<size_t>(p)]));
  worst = std::max(worst, max_diff(dev.feed({ids + 5, 7}), want.back()));  // a chunk after
  INFO("max |device - host| " << worst << " of logits up to " << scale);
  CHECK(worst <= k.tolerance * scale);
  if (k.dtype != DType::kF32 && k.dtype != DType::kF64) CHECK(worst > 0);  // it ran narrow
}

}  // namespace
}  // namespace mtnlg
