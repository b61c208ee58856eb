// StageScorer (cmd/stage_scorer.h), the training forward as a scorer, against GPTScorer on the
// whole model: in every layout of up to four ranks (tensor x pipeline x data, as threads over a
// MemoryStore with Gloo groups; interleaved model chunks and sequence parallelism too) each
// request's log-likelihood equals the packed scorer's to
// float32 rounding and its greedy flag is the same; the rows cover shared prefixes, targets of
// one token, rows of the whole window and micro-batches of several shapes. In bf16 the scores
// stay near fp32's.
#include "cmd/stage_scorer.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "model/gpt_scorer.h"
#include "parallel/store.h"
#include "parallel/topology.h"
#include "parallel/transport.h"
#include "test_util.h"
#include "tiny_gpt.h"

namespace mtnlg {
namespace {

GPTConfig config() {
  GPTConfig c = test::tiny_gpt(4);
  c.heads = 4;   // tensor 4 divides them
  c.vocab = 60;  // padded to 64: tensor 2 and 4 shards, the last with padding columns
  c.padded_vocab = 64;
  c.seq = 8;  // the recipe's length; scoring sets its own
  c.max_positions = 40;
  c.init_std = 0.3;
  c.hidden_dropout = c.attention_dropout = 0.1;  // evaluation mode turns them off
  return c;
}

std::vector<ScoreGroup> requests() {
  std::vector<ScoreGroup> g;
  uint32_t x = 7;
  auto next = [&] {
    x = x * 1103515245u + 12345u;
    return static_cast<int32_t>((x >> 16) % 60);
  };
  auto tokens = [&](int n) {
    std::vector<int32_t> t;
    for (int i = 0; i < n; ++i) t.push_back(next());
    return t;
  };
  for (int i = 0; i < 9; ++i) {  // multiple choice: one prefix, several targets
    ScoreGroup s{tokens(3 + 3 * i), {}};
    for (int k = 0; k < 1 + i % 4; ++k) s.targets.push_back(tokens(1 + (i + k) % 5));
    g.push_back(std::move(s));
  }
  g.push_back({tokens(1), {tokens(1)}});    // the shortest row
  g.push_back({tokens(30), {tokens(11)}});  // the whole window: 40 positions
  g.push_back({tokens(39), {tokens(1)}});
  return g;
}

using Scores = std::vector<std::vector<TargetScore>>;

Scores reference() {
  const GPTConfig c = config();
  auto be = make_cpu_backend(1);
  GPTStage model(c, full_model(c), *be, DType::kF32, 5);
  model.init_weights(5);
  model.set_training(false);
  GPTScorer scorer(model, 2 * c.max_positions);
  const auto g = requests();
  return scorer.score(g);
}

// Every rank's scores from StageScorer in a tensor x pipeline x data layout.
std::vector<Scores> stage_scores(int64_t tp, int64_t pp, int64_t dp, DType dtype, int64_t budget,
                                 int64_t vp = 1, bool sp = false) {
  const int world = static_cast<int>(tp * pp * dp);
  MemoryStore store;
  std::vector<Scores> out(static_cast<size_t>(world));
  test::run_ranks(world, [&](int rank) {
    const Topology topo({tp, pp, dp}, rank);
    ProcessGroups groups = make_host_groups(
        topo, store, TransportOptions::resolve(Transport::kGloo, std::chrono::milliseconds(30000)));
    GPTConfig c = config();
    c.tp_size = tp;
    c.tp_rank = topo.tensor_rank();
    c.virtual_pipeline = vp;  // model chunks a stage (the interleaved schedule's)
    c.sequence_parallel = sp;
    auto be = make_cpu_backend(1);
    GPTStage model(c, pipeline_stage(c, pp, topo.pipeline_rank()), *be, dtype, 5,
                   tp > 1 ? groups.tensor.get() : nullptr);
    model.init_weights(5);  // the same weights in any layout (model/gpt_params.h)
    model.set_training(false);
    ScorerGroups sg;
    sg.tensor = tp > 1 ? groups.tensor.get() : nullptr;
    sg.pipeline = pp > 1 ? groups.pipeline.get() : nullptr;
    sg.data = dp > 1 ? groups.data.get() : nullptr;
    StageScorer scorer(model, sg, budget);
    const auto g = requests();
    out[static_cast<size_t>(rank)] = scorer.score(g);
  });
  return out;
}

TEST_CASE("stage scorer equals the packed rows in every layout of up to four ranks") {
  const Scores want = reference();
  struct Layout {
    int64_t tp, pp, dp, budget, vp = 1;
    bool sp = false;
  };
  const Layout l =
      GENERATE(Layout{1, 1, 1, 40}, Layout{1, 1, 1, 200}, Layout{2, 1, 1, 80}, Layout{1, 2, 1, 80},
               Layout{2, 2, 1, 120}, Layout{1, 1, 2, 80}, Layout{2, 1, 2, 40}, Layout{4, 1, 1, 80},
               Layout{1, 2, 1, 80, 2}, Layout{2, 1, 1, 80, 1, true}, Layout{2, 2, 1, 80, 2, true});
  INFO("tensor " << l.tp << ", pipeline " << l.pp << ", data " << l.dp << ", budget " << l.budget
                 << ", chunks " << l.vp << ", sequence parallel " << l.sp);
  const std::vector<Scores> got = stage_scores(l.tp, l.pp, l.dp, DType::kF32, l.budget, l.vp, l.sp);
  for (size_t r = 0; r < got.size(); ++r) {
    REQUIRE(got[r].size() == want.size());
    for (size_t g = 0; g < want.size(); ++g) {
      REQUIRE(got[r][g].size() == want[g].size());
      for (size_t t = 0; t < want[g].size(); ++t) {
        INFO("rank " << r << ", group " << g << ", target " << t << ": " << got[r][g][t].logprob
                     << " vs " << want[g][t].logprob);
        CHECK(std::abs(got[r][g][t].logprob - want[g][t].logprob) <=
              1e-5 * std::abs(want[g][t].logprob) + 1e-6);
        CHECK(got[r][g][t].greedy == want[g][t].greedy);
      }
    }
  }
}

TEST_CASE("stage scorer in bf16 stays near the fp32 scores") {
  const Scores want = reference();
  const std::vector<Scores> got = stage_scores(2, 1, 1, DType::kBF16, 80);
  double worst = 0;
  for (size_t g = 0; g < want.size(); ++g)
    for (size_t t = 0; t < want[g].size(); ++t) {
      const double lp = got[0][g][t].logprob, ref = want[g][t].logprob;
      REQUIRE(std::isfinite(lp));
      worst = std::max(worst, std::abs(lp - ref) / (std::abs(ref) + 1.0));
      CHECK(got[1][g][t].logprob == lp);  // the tensor ranks agree
    }
  INFO("worst relative difference " << worst);
  CHECK(worst < 0.05);  // bf16's 2^-8 roundoff through 4 layers
  CHECK(worst > 0);     // it did run in bf16
}

TEST_CASE(
    "stage scorer names a request too long for the window or a token outside the vocabulary") {
  const GPTConfig c = config();
  auto be = make_cpu_backend(1);
  GPTStage model(c, full_model(c), *be, DType::kF32, 5);
  model.set_training(false);
  StageScorer scorer(model, {}, 40);
  const std::vector<ScoreGroup> too_long = {
      {std::vector<int32_t>(35, 1), {std::vector<int32_t>(7, 2)}}};
  CHECK_THROWS_WITH(scorer.score(too_long), Catch::Contains("exceed the model's 40 positions"));
  const std::vector<ScoreGroup> bad = {{{1, 2}, {{60}}}};
  CHECK_THROWS_WITH(scorer.score(bad), Catch::Contains("outside the vocabulary of 60"));
  const std::vector<ScoreGroup> empty = {{{1}, {{}}}};
  CHECK_THROWS_WITH(scorer.score(empty), Catch::Contains("an empty target"));
}

}  // namespace
}  // namespace mtnlg
