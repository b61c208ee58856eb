#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <tuple>
#include <vector>

#include "cmd/trainer.h"
#include "core/logging.h"
#include "core/state_tensor.h"
#include "model/gpt_stage.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "overflow_seam.h"
#include "test_util.h"
#include "tiny_corpus.h"

using namespace mtnlg;
using mtnlg::test::write_corpus;

namespace {

Recipe tiny_recipe(const test::TempDir& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> sets = {"data.blend=[{prefix: " + dir.file("corpus") + ", weight: 1}]",
                                   "logging.metrics_file=" + dir.file("run/metrics.jsonl"),
                                   "logging.interval=25", "data.split=[1, 0, 0]",
                                   "data.cache_dir=" + dir.file("cache")};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return load_recipe(test::source_path("configs/tiny.yaml"), sets);
}

std::vector<double> losses_of(const std::vector<IterationStats>& stats) {
  std::vector<double> out;
  for (const auto& s : stats) out.push_back(s.loss);
  return out;
}

// What each iteration logged that the optimizer decides: loss, grad norm (-1 where skipped),
// learning rate, skipped.
std::vector<std::tuple<double, double, double, bool>> trace_of(
    const std::vector<IterationStats>& stats) {
  std::vector<std::tuple<double, double, double, bool>> out;
  for (const auto& s : stats)
    out.emplace_back(s.loss, std::isnan(s.grad_norm) ? -1.0 : s.grad_norm, s.lr, s.skipped);
  return out;
}

struct Quiet {
  Quiet() { init_logging("warn"); }
};

}  // namespace

TEST_CASE("tiny recipe: 50 iterations - the loss falls - metrics lines are complete") {
  Quiet quiet;
  test::TempDir dir;
  write_corpus(dir.file("corpus"), 400, 512);
  const Recipe recipe = tiny_recipe(dir);
  REQUIRE(recipe.schedule.train_iters == 50);
  Trainer trainer(recipe, TrainerOptions{2, true});
  const auto stats = trainer.run();
  REQUIRE(stats.size() == 50);
  const auto losses = losses_of(stats);
  const double first = std::accumulate(losses.begin(), losses.begin() + 5, 0.0) / 5;
  const double last = std::accumulate(losses.end() - 5, losses.end(), 0.0) / 5;
  INFO("first 5 mean " << first << ", last 5 mean " << last);
  CHECK(first == Approx(std::log(512.0)).margin(0.3));  // random init: about uniform
  CHECK(last < first - 1.0);

  // The metrics file has one line per iteration with every contract field.
  std::ifstream in(dir.file("run/metrics.jsonl"));
  std::string line;
  int n = 0;
  const LrSchedule schedule(recipe.optimizer, recipe.schedule);
  while (std::getline(in, line)) {
    ++n;
    for (const char* key : {"\"iteration\": ", "\"loss\": ", "\"lr\": ", "\"global_batch_size\": ",
                            "\"consumed_samples\": ", "\"consumed_tokens\": ", "\"grad_norm\": ",
                            "\"tokens_per_sec\": ", "\"elapsed_ms\": ", "\"loss_scale\": 1,",
                            "\"skipped_iterations\": 0"})
      CHECK(line.find(key) != std::string::npos);
    CHECK(line.find("\"iteration\": " + std::to_string(n) + ",") != std::string::npos);
    const int64_t tokens = int64_t{n} * recipe.tokens_per_iteration();
    CHECK(line.find("\"consumed_tokens\": " + std::to_string(tokens) + ",") != std::string::npos);
    const auto& s = stats[static_cast<size_t>(n - 1)];
    CHECK(s.lr == schedule.lr_at(tokens));
    CHECK(s.consumed_samples == n * recipe.batch.global_batch_size);
  }
  CHECK(n == 50);
  // The resolved recipe sits beside the metrics and loads back to the same recipe.
  const Recipe saved = load_recipe(dir.file("run/resolved_recipe.yaml"), {});
  CHECK(recipe_to_yaml(saved) == recipe_to_yaml(recipe));
}

TEST_CASE("same seed gives bit-identical losses - another seed does not") {
  Quiet quiet;
  test::TempDir dir;
  write_corpus(dir.file("corpus"), 200, 512);
  const auto run = [&](const std::string& seed) {
    Trainer t(tiny_recipe(dir, {"seed=" + seed, "schedule.train_iters=50"}),
              TrainerOptions{2, false});
    return losses_of(t.run());
  };
  const auto a = run("11"), b = run("11"), c = run("12");
  REQUIRE(a.size() == 50);
  CHECK(a == b);  // exact equality, every iteration
  CHECK(a != c);
}

TEST_CASE("activation checkpointing recomputes exactly: identical losses") {
  Quiet quiet;
  test::TempDir dir;
  write_corpus(dir.file("corpus"), 200, 512);
  const auto run = [&](const std::string& ckpt) {
    Trainer t(
        tiny_recipe(dir, {"parallel.activation_checkpointing=" + ckpt, "schedule.train_iters=8"}),
        TrainerOptions{2, false});
    return losses_of(t.run());
  };
  CHECK(run("true") == run("false"));
}

// parallel.cuda_graph: each micro-batch replayed from one recording (on the CPU the calls again),
// recorded as micro-batch 0 with dropout's streams moved to the micro-batch's before each replay.
// Dropout on (the tiny recipe's), so a replay that kept micro-batch 0's masks would differ (as
// it does with the base left out of CapturedMicroBatch::run); a batch ramp changes the gradient
// scale mid-run (recorded again); recomputation too; fp16, whose loss scale is in the gradient
// scale. The optimizer step is replayed too (CapturedAdamWStep): the learning rate warms up and
// decays, clipping acts (clip_grad 0.05) or not, and fp16 starts at a loss scale of 1e8, whose
// first iterations overflow and are skipped on the device as the host skips them; the losses,
// norms, rates and skips are the plain run's bit for bit.
TEST_CASE(
    "parallel.cuda_graph gives bit-identical losses with dropout - a batch ramp - recompute") {
  Quiet quiet;
  test::TempDir dir;
  write_corpus(dir.file("corpus"), 200, 512);
  const auto run = [&](const std::string& graph, const std::string& ckpt,
                       const std::string& precision, const std::string& clip = "1.0") {
    // fp16 from a loss scale that overflows 6 times, halved at each.
    Trainer t(
        tiny_recipe(dir, {"parallel.cuda_graph=" + graph, "schedule.train_iters=10",
                          "parallel.activation_checkpointing=" + ckpt, "precision=" + precision,
                          "batch.rampup={start: 2, increment: 2, tokens: 256}",
                          "optimizer.clip_grad=" + clip, "optimizer.initial_loss_scale=1e8",
                          "optimizer.hysteresis=1"}),
        TrainerOptions{2, false});
    return trace_of(t.run());
  };
  const auto plain = run("false", "false", "fp32");
  REQUIRE(plain.size() == 10);
  CHECK(run("true", "false", "fp32") == plain);
  CHECK(run("true", "true", "fp32") == plain);
  const auto clipped = run("false", "false", "fp32", "0.05");
  CHECK(clipped != plain);  // the clip acted
  CHECK(run("true", "false", "fp32", "0.05") == clipped);
  // Evaluations between steps: their plain calls invalidate the recordings, which record again.
  const auto evaluated = [&](const std::string& graph) {
    Trainer t(tiny_recipe(dir, {"parallel.cuda_graph=" + graph, "schedule.train_iters=7",
                                "data.split=[8, 2, 0]", "eval.interval=3", "eval.iters=1"}),
              TrainerOptions{2, false});
    return trace_of(t.run());
  };
  CHECK(evaluated("true") == evaluated("false"));
  const auto fp16 = run("false", "false", "fp16");
  CHECK(std::get<3>(fp16.front()));       // an overflow skipped
  CHECK_FALSE(std::get<3>(fp16.back()));  // then updates
  CHECK(run("true", "false", "fp16") == fp16);
}

TEST_CASE("gradient accumulation: one micro-batch of 4 equals four of 1 (no dropout)") {
  Quiet quiet;
  test::TempDir dir;
  write_corpus(dir.file("corpus"), 200, 512);
  const auto run = [&](const std::string& micro) {
    Trainer t(tiny_recipe(dir, {"parallel.micro_batch_size=" + micro, "schedule.train_iters=5",
                                "model.hidden_dropout=0", "model.attention_dropout=0"}),
              TrainerOptions{1, false});
    return losses_of(t.run());
  };
  const auto a = run("4"), b = run("1");
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-5));
}

TEST_CASE("train_tokens ends training after the iteration that reaches it") {
  Quiet quiet;
  test::TempDir dir;
  write_corpus(dir.file("corpus"), 100, 512);
  const Recipe r = tiny_recipe(dir, {"schedule.train_iters=0", "schedule.train_tokens=300"});
  // 4 samples x 32 tokens = 128 tokens per iteration: 300 tokens need 3 iterations.
  CHECK(planned_iterations(r) == 3);
  Trainer t(r, TrainerOptions{1, false});
  CHECK(t.run().size() == 3);
}

TEST_CASE("a missing corpus names the file") {
  Quiet quiet;
  test::TempDir dir;
  try {
    Trainer t(tiny_recipe(dir), TrainerOptions{1, false});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kNotFound);
    CHECK(std::string(e.what()).find(dir.file("corpus")) != std::string::npos);
  }
}

TEST_CASE("a token id at or above model.vocab_size is an error naming the data and the key") {
  Quiet quiet;
  test::TempDir dir;
  write_corpus(dir.file("corpus"), 3, 512, /*max_token=*/600);
  // Found when the run starts (the whole .bin is scanned once, then cached), not when the
  // sample is drawn.
  try {
    Trainer t(tiny_recipe(dir, {"schedule.train_iters=200"}), TrainerOptions{1, false});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.context() == "data.blend[0]");
    const std::string what = e.what();
    CHECK(what.find("600") != std::string::npos);
    CHECK(what.find("model.vocab_size") != std::string::npos);
    CHECK(what.find(dir.file("corpus")) != std::string::npos);
  }
}

TEST_CASE("a recipe this build cannot train is refused before anything is allocated") {
  Quiet quiet;
  test::TempDir dir;
  write_corpus(dir.file("corpus"), 10, 512);
  // Tensor parallelism trains, but not without its tensor group (one process).
  try {
    Trainer t(tiny_recipe(dir, {"parallel.tensor=2"}), TrainerOptions{1, false});
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK(e.context() == "parallel.tensor");
  }
}

TEST_CASE("a shuffled two-dataset blend with a batch ramp and evaluation trains and reproduces") {
  Quiet quiet;
  test::TempDir dir;
  write_corpus(dir.file("a"), 300, 512);
  write_corpus(dir.file("b"), 200, 512);
  const std::vector<std::string> sets = {"data.blend=[{prefix: " + dir.file("a") +
                                             ", weight: 3}, {prefix: " + dir.file("b") +
                                             ", weight: 1}]",
                                         "data.shuffle=true",
                                         "data.split=[90, 10, 0]",
                                         "data.cache_dir=" + dir.file("cache"),
                                         "eval={interval: 5, iters: 2}",
                                         "batch.rampup={start: 2, increment: 2, tokens: 512}",
                                         "schedule.train_iters=12",
                                         "logging.metrics_file=" + dir.file("run/metrics.jsonl")};
  const auto run = [&] {
    Trainer t(load_recipe(test::source_path("configs/tiny.yaml"), sets), TrainerOptions{2, true});
    auto stats = t.run();
    return std::make_pair(stats, t.evaluations());
  };
  const auto [stats, evals] = run();
  REQUIRE(stats.size() == 12);
  // Ramp 2 -> 4 by 2 over 512 tokens (one step of 512 tokens): batch 2 while consumed <= 512
  // tokens (8 iterations of 64 tokens), then 4.
  for (size_t i = 0; i < stats.size(); ++i) {
    INFO("iteration " << i + 1);
    CHECK(stats[i].global_batch_size == (i < 8 ? 2 : 4));
  }
  CHECK(stats.back().consumed_samples == 8 * 2 + 4 * 4);
  // Evaluations after iterations 5, 10 and the last one (12), on the valid split, no dropout.
  REQUIRE(evals.size() == 3);
  CHECK(evals[0].iteration == 5);
  CHECK(evals[2].iteration == 12);
  CHECK(evals[0].samples == 2 * 4);
  for (const auto& e : evals) {
    CHECK(std::isfinite(e.loss));
    CHECK(e.ppl == Approx(std::exp(e.loss)));
  }
  const std::string metrics = test::read_file(dir.file("run/metrics.jsonl"));
  CHECK(metrics.find("\"split\": \"valid\"") != std::string::npos);
  // A second run reuses the cached indices and reproduces every loss bit for bit.
  const auto [stats2, evals2] = run();
  REQUIRE(stats2.size() == stats.size());
  for (size_t i = 0; i < stats.size(); ++i) CHECK(stats2[i].loss == stats[i].loss);
  CHECK(evals2[2].loss == evals[2].loss);
}

namespace {

// Every element of the named state (weights, or the optimizer's moments and masters), bitwise.
std::vector<uint32_t> bits_of(const std::vector<StateTensor>& state) {
  std::vector<uint32_t> out;
  for (const StateTensor& s : state) {
    const auto* p = static_cast<const unsigned char*>(s.tensor.data());
    for (size_t i = 0; i + 1 < s.tensor.nbytes(); i += 2)
      out.push_back(static_cast<uint32_t>(p[i] | (p[i + 1] << 8)));
  }
  return out;
}

}  // namespace

TEST_CASE("fp16: an overflow skips the update, halves the scale, leaves the state bit-identical") {
  Quiet quiet;
  test::TempDir dir;
  write_corpus(dir.file("corpus"), 100, 512);
  // Hysteresis 1: the first overflow halves the scale (Megatron's default 2 takes two).
  const std::vector<std::string> fp16 = {"precision=fp16", "optimizer.hysteresis=1",
                                         "optimizer.initial_loss_scale=1024",
                                         "schedule.train_iters=6"};
  Trainer plain(tiny_recipe(dir, fp16), TrainerOptions{1, false});
  std::vector<IterationStats> want;
  for (int i = 0; i < 6; ++i) want.push_back(plain.train_step());

  TrainerOptions inject{1, false};
  inject.hooks = test::overflow_at(3);
  Trainer t(tiny_recipe(dir, fp16), inject);
  std::vector<IterationStats> got;
  for (int i = 0; i < 2; ++i) got.push_back(t.train_step());
  const auto weights = bits_of(t.model().params().state());
  const auto optimizer = bits_of(t.optimizer().state());
  const int64_t steps = t.optimizer().steps();
  got.push_back(t.train_step());  // iteration 3: the inf in this rank's gradients
  CHECK(got[2].skipped);
  CHECK(std::isnan(got[2].grad_norm));
  CHECK(got[2].skipped_iterations == 1);
  CHECK(got[2].loss == want[2].loss);  // the forward ran on the same weights and data
  CHECK((bits_of(t.model().params().state()) == weights));  // (): no dump of the vectors
  CHECK((bits_of(t.optimizer().state()) == optimizer));
  CHECK(t.optimizer().steps() == steps);
  // The schedule did not move: iteration 3 reports (and iteration 4 uses) the rate the uninjected
  // run used at iteration 3.
  CHECK(got[2].lr == want[1].lr);
  got.push_back(t.train_step());
  CHECK(got[3].lr == want[2].lr);
  CHECK(got[2].loss_scale == 1024);
  CHECK(got[3].loss_scale == 512);  // halved by the overflow
  CHECK_FALSE(got[3].skipped);
  CHECK(got[3].skipped_iterations == 1);
  for (int i = 0; i < 2; ++i) {
    CHECK(want[i].loss_scale == 1024);
    CHECK(got[i].loss == want[i].loss);  // bitwise the same before the injection
    CHECK(got[i].grad_norm == want[i].grad_norm);
  }
}
