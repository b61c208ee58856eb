// GPTScorer (model/gpt_scorer.h): the log-likelihood and greediness of every target of packed
// groups (shared prefixes, several groups to a forward, one-token targets, batches split by
// max_rows) equal those the training forward (GPTStage) gives prefix + target alone; and what it
// refuses.
#include "model/gpt_scorer.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/status.h"
#include "test_util.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

// prefix + target through the training forward (the rest of the window filled with other ids:
// causality makes them irrelevant), the target's tokens read off the log-softmax in double.
TargetScore reference(GPTStage& model, const std::vector<int32_t>& prefix,
                      const std::vector<int32_t>& target) {
  const GPTConfig& c = model.config();
  Tensor tokens = Tensor::cpu({1, c.seq}, DType::kI32);
  std::vector<int32_t> all = prefix;
  all.insert(all.end(), target.begin(), target.end() - 1);
  REQUIRE(static_cast<int64_t>(all.size()) <= c.seq);
  for (int64_t t = 0; t < c.seq; ++t)
    tokens.data_as<int32_t>()[t] = t < static_cast<int64_t>(all.size())
                                       ? all[static_cast<size_t>(t)]
                                       : static_cast<int32_t>((t * 11) % c.vocab);
  StageActivations acts = model.make_activations(1);
  model.forward(acts, tokens, tokens, 0);
  TargetScore s;
  s.greedy = true;
  for (size_t j = 0; j < target.size(); ++j) {
    const int64_t row = static_cast<int64_t>(prefix.size() + j) - 1;
    const float* lg = acts.logits.data_as<float>() + row * c.padded_vocab;
    int64_t arg = 0;
    double top = lg[0];
    for (int64_t v = 1; v < c.vocab; ++v)
      if (lg[v] > top) top = lg[arg = v];
    double sum = 0;
    for (int64_t v = 0; v < c.vocab; ++v) sum += std::exp(double(lg[v]) - top);
    s.logprob += double(lg[target[j]]) - top - std::log(sum);
    s.greedy = s.greedy && arg == target[j];
  }
  return s;
}

std::vector<int32_t> ids(int64_t n, int64_t vocab, int64_t seed) {
  std::vector<int32_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<int32_t>((seed * 31 + i * 17) % vocab));
  return v;
}

TEST_CASE("packed groups score as each prefix + target alone") {
  const int threads = GENERATE(1, 2);
  GPTConfig c = test::tiny_gpt(3);
  c.seq = 12;
  c.max_positions = 12;
  c.init_std = 0.2;  // logits far from uniform, so a wrong mask shows
  auto backend = make_cpu_backend(threads);
  GPTStage model(c, full_model(c), *backend, DType::kF32, 5);
  model.init_weights(5);
  model.set_training(false);

  std::vector<ScoreGroup> groups;
  // A context with three choices; a one-token prefix; one-token targets; a full window.
  groups.push_back(
      {ids(5, c.vocab, 1), {ids(3, c.vocab, 2), ids(1, c.vocab, 3), ids(4, c.vocab, 4)}});
  groups.push_back({ids(1, c.vocab, 5), {ids(6, c.vocab, 6)}});
  groups.push_back({ids(7, c.vocab, 7), {ids(1, c.vocab, 8), ids(1, c.vocab, 9)}});
  // 2 + 10 + 1 = 13 rows: past max_rows 12, its targets go one by one.
  groups.push_back({ids(2, c.vocab, 10), {ids(11, c.vocab, 11), ids(2, c.vocab, 12)}});
  // A greedy target: the reference's own argmax continuation of a prefix.
  {
    std::vector<int32_t> prefix = ids(4, c.vocab, 13), target;
    for (int k = 0; k < 3; ++k) {
      std::vector<int32_t> probe = target;
      probe.push_back(0);
      Tensor tokens = Tensor::cpu({1, c.seq}, DType::kI32);
      std::vector<int32_t> all = prefix;
      all.insert(all.end(), target.begin(), target.end());
      for (int64_t t = 0; t < c.seq; ++t)
        tokens.data_as<int32_t>()[t] = t < int64_t(all.size()) ? all[size_t(t)] : 0;
      StageActivations acts = model.make_activations(1);
      model.forward(acts, tokens, tokens, 0);
      const float* lg = acts.logits.data_as<float>() + (int64_t(all.size()) - 1) * c.padded_vocab;
      int32_t arg = 0;
      for (int32_t v = 1; v < c.vocab; ++v)
        if (lg[v] > lg[arg]) arg = v;
      target.push_back(arg);
    }
    groups.push_back({prefix, {target}});
  }

  // max_rows as small as the model's window (12) splits these into several forwards; larger,
  // several groups share one.
  const int64_t max_rows = GENERATE(12, 64);
  GPTScorer scorer(model, max_rows);
  std::vector<int64_t> progress;
  const auto got = scorer.score(groups, [&](int64_t done) { progress.push_back(done); });
  REQUIRE(got.size() == groups.size());
  CHECK(progress.back() == static_cast<int64_t>(groups.size()));
  // 12 rows: groups 0 (10 rows), 1 (6), 2 (7), 4 (6) a forward each, and group 3's targets
  // alone (12 and 3 rows) in two more, unreported; 64 rows: one forward of all 42.
  CHECK(progress.size() == (max_rows == 12 ? 4u : 1u));
  CHECK(scorer.tokens_run() == (max_rows == 12 ? 10 + 6 + 7 + 6 + 12 + 3 : 42));

  bool any_greedy = false, any_not = false;
  for (size_t g = 0; g < groups.size(); ++g) {
    REQUIRE(got[g].size() == groups[g].targets.size());
    for (size_t t = 0; t < groups[g].targets.size(); ++t) {
      const TargetScore want = reference(model, groups[g].prefix, groups[g].targets[t]);
      INFO("group " << g << " target " << t << ": " << got[g][t].logprob << " vs " << want.logprob);
      CHECK(std::abs(got[g][t].logprob - want.logprob) <= 1e-5 * std::max(1.0, -want.logprob));
      CHECK(got[g][t].greedy == want.greedy);
      (want.greedy ? any_greedy : any_not) = true;
    }
  }
  CHECK(any_greedy);
  CHECK(any_not);
}

TEST_CASE("the scorer refuses groups that do not fit") {
  GPTConfig c = test::tiny_gpt(2);
  c.seq = 8;
  c.max_positions = 8;
  auto backend = make_cpu_backend(1);
  GPTStage model(c, full_model(c), *backend, DType::kF32, 5);
  model.init_weights(5);
  GPTScorer scorer(model, 8);
  CHECK(scorer.max_rows() == 8);
  auto refuses = [&](ScoreGroup g, const char* what) {
    std::vector<ScoreGroup> one{std::move(g)};
    CHECK_THROWS_WITH(scorer.score(one), Catch::Contains(what));
  };
  refuses({{}, {{1}}}, "needs a prefix");
  refuses({{1}, {}}, "needs a prefix and at least one target");
  refuses({{1}, {{}}}, "an empty target");
  refuses({ids(5, c.vocab, 1), {ids(5, c.vocab, 2)}}, "exceed the model's 8 positions");
  refuses({{1, static_cast<int32_t>(c.vocab)}, {{1}}}, "outside the vocabulary");
  // The model's window is the least a forward holds.
  CHECK(GPTScorer(model, 2).max_rows() == 8);
}

}  // namespace
}  // namespace mtnlg
