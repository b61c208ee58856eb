// Scoring requests (cmd/task_eval.h): the choices of one context scored from one pass over the
// context (score_choices: the decoder rewound to the context's end for each) give each choice's
// score_request, with a short context (shared) and one too long for the window (each alone).
#include "cmd/task_eval.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "core/status.h"
#include "test_util.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

TEST_CASE("the choices of one context share its pass and score as each alone") {
  GPTConfig c = test::tiny_gpt(2);
  c.vocab = 50257;  // GPT-2's ids
  c.padded_vocab = 50304;
  c.seq = 24;
  c.max_positions = 24;
  c.init_std = 0.2;
  auto backend = make_cpu_backend(1);
  GPTStage model(c, full_model(c), *backend, DType::kF32, 3);
  model.init_weights(3);
  model.set_training(false);
  GPTDecoder decoder(model, c.max_positions);
  const auto tok = Gpt2Tokenizer::load(test::source_path("data/gpt2/encoder.json"),
                                       test::source_path("data/gpt2/vocab.bpe"));
  const std::vector<std::string> choices = {" yes", " no", " maybe not", " a longer answer here"};
  for (const std::string& context :
       {std::string("Question: is it?\nAnswer:"),
        std::string("A context long enough that the window of twenty-four positions cannot hold "
                    "it and a continuation whole, so each request is truncated on its own.")}) {
    INFO(context);
    const std::vector<Loglikelihood> shared = score_choices(decoder, *tok, context, choices);
    REQUIRE(shared.size() == choices.size());
    for (size_t i = 0; i < choices.size(); ++i) {
      const Loglikelihood alone = score_request(decoder, *tok, context, choices[i]);
      CHECK(std::abs(shared[i].logprob - alone.logprob) <= 1e-5 * std::abs(alone.logprob));
      CHECK(shared[i].greedy == alone.greedy);
    }
  }
  decoder.reset();
  CHECK_THROWS_AS(decoder.rewind(1), Error);
}

}  // namespace
}  // namespace mtnlg
