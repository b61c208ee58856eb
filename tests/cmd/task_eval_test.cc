// Scoring requests (cmd/task_eval.h): a RequestSet's requests, packed many to a forward with the
// choices of one context sharing it (a short context) or each its own truncated window (a context
// too long for the window), score as the harness scores each request alone: its window
// (tasks::causal_input) fed to the cached decoder, the continuation read off the log-softmax.
#include "cmd/task_eval.h"
#include "model/gpt_scorer.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/gpt_decoder.h"
#include "test_util.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

// One request alone, through the decoder (a different path from the scorer's packed rows).
Loglikelihood alone(GPTDecoder& decoder, const Gpt2Tokenizer& tok, const std::string& context,
                    const std::string& continuation) {
  const tasks::TokenPair pair = tasks::encode_request(tok, context, continuation, tok.eod());
  const tasks::ModelInput in = tasks::causal_input(pair, decoder.max_tokens());
  decoder.reset();
  const std::vector<float> logits = decoder.feed_rows(in.tokens, in.first_scored);
  const int64_t vocab = decoder.vocab();
  Loglikelihood r{0, true};
  for (size_t j = 0; j < pair.continuation.size(); ++j) {
    const float* lg = logits.data() + static_cast<int64_t>(j) * vocab;
    int64_t arg = 0;
    for (int64_t v = 1; v < vocab; ++v)
      if (lg[v] > lg[arg]) arg = v;
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(lg[v]) - lg[arg]);
    r.logprob += double(lg[pair.continuation[j]]) - lg[arg] - std::log(sum);
    r.greedy = r.greedy && arg == pair.continuation[j];
  }
  return r;
}

TEST_CASE("packed requests score as each request alone") {
  GPTConfig c = test::tiny_gpt(2);
  c.vocab = 50257;  // GPT-2's ids
  c.padded_vocab = 50304;
  c.seq = 24;
  c.max_positions = 24;
  c.init_std = 0.2;
  auto backend = make_cpu_backend(2);
  GPTStage model(c, full_model(c), *backend, DType::kF32, 3);
  model.init_weights(3);
  model.set_training(false);
  GPTDecoder decoder(model, c.max_positions);
  const auto tok = Gpt2Tokenizer::load(test::source_path("data/gpt2/encoder.json"),
                                       test::source_path("data/gpt2/vocab.bpe"));
  const std::vector<std::string> choices = {" yes", " no", " maybe not", " a longer answer here"};
  const std::vector<std::string> contexts = {
      "Question: is it?\nAnswer:",
      "A context long enough that the window of twenty-four positions cannot hold it and a "
      "continuation whole, so each request is truncated on its own.",
      "",  // the empty context's rule: <|endoftext|> as the context
      "Short."};
  // A batch of one window packs one document at a time; four, all of them together.
  const int64_t batch = GENERATE(1, 4);
  GPTScorer scorer(model, batch * c.max_positions);
  RequestSet set(c.max_positions);
  for (const std::string& context : contexts) set.add(*tok, context, choices);
  set.add(tasks::TokenPair{{tok->eod()}, {}});  // nothing to score: 0 and greedy
  REQUIRE(set.size() == static_cast<int64_t>(contexts.size() * choices.size() + 1));
  const std::vector<Loglikelihood> got = set.score(scorer, "test");
  REQUIRE(static_cast<int64_t>(got.size()) == set.size());
  size_t r = 0;
  for (const std::string& context : contexts)
    for (const std::string& choice : choices) {
      const Loglikelihood want = alone(decoder, *tok, context, choice);
      INFO("'" << context << "' + '" << choice << "': " << got[r].logprob << " vs "
               << want.logprob);
      CHECK(std::abs(got[r].logprob - want.logprob) <= 1e-5 * std::abs(want.logprob));
      CHECK(got[r].greedy == want.greedy);
      ++r;
    }
  CHECK(got[r].logprob == 0);
  CHECK(got[r].greedy);
}

}  // namespace
}  // namespace mtnlg
