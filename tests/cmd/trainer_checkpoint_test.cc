// The Trainer with checkpoints, in one process: a stopped-and-resumed run logs bit-identical
// losses, grad norms and validation losses to one that never stopped (dropout on, a shuffled
// two-dataset blend, a batch ramp, evaluation), with synchronous and asynchronous saves; a stop
// signal saves and stops at the iteration boundary; the weights alone start a fine-tune; a
// checkpoint of another model shape is refused naming the key.
#include <catch2/catch.hpp>

#include <csignal>
#include <filesystem>

#include "checkpoint/checkpoint_dir.h"
#include "cmd/trainer.h"
#include "core/logging.h"
#include "core/state_tensor.h"
#include "core/status.h"
#include "core/stop_signal.h"
#include "model/gpt_stage.h"
#include "optim/optimizer.h"
#include "test_util.h"
#include "tiny_corpus.h"

using namespace mtnlg;

namespace {

struct Run {
  std::vector<IterationStats> stats;
  std::vector<EvalStats> evals;
  StopReason stop = StopReason::kFinished;
  int64_t iteration = 0;
};

class Fixture {
 public:
  Fixture() {
    init_logging("warn");
    test::write_corpus(dir.file("a"), 300, 512);
    test::write_corpus(dir.file("b"), 200, 512);
  }
  // A run of `iters` iterations of the tiny model on the blend (decay fixed, so the schedule
  // does not depend on the run's length) with the extra overrides.
  Recipe recipe(int64_t iters, const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> sets = {"data.blend=[{prefix: " + dir.file("a") +
                                         ", weight: 3}, {prefix: " + dir.file("b") +
                                         ", weight: 1}]",
                                     "data.shuffle=true",
                                     "data.split=[90, 10, 0]",
                                     "data.cache_dir=" + dir.file("cache"),
                                     "eval={interval: 3, iters: 1}",
                                     "batch.rampup={start: 2, increment: 2, tokens: 256}",
                                     "schedule.decay_tokens=2048",
                                     "schedule.train_iters=" + std::to_string(iters),
                                     "logging.metrics_file=" + dir.file(name + "/metrics.jsonl")};
    sets.insert(sets.end(), extra.begin(), extra.end());
    return load_recipe(test::source_path("configs/tiny.yaml"), sets);
  }
  Run run(int64_t iters, const std::string& name, std::vector<std::string> extra = {}) {
    Trainer t(recipe(iters, name, std::move(extra)), TrainerOptions{2, true});
    Run r;
    r.stats = t.run();
    r.evals = t.evaluations();
    r.stop = t.stop_reason();
    r.iteration = t.iteration();
    return r;
  }
  test::TempDir dir;
};

// Iterations of `part` equal, bit for bit, the same iterations of `whole`.
void check_same(const Run& whole, const Run& part) {
  REQUIRE_FALSE(part.stats.empty());
  for (const IterationStats& s : part.stats) {
    INFO("iteration " << s.iteration);
    const IterationStats& w = whole.stats.at(static_cast<size_t>(s.iteration - 1));
    CHECK(s.loss == w.loss);
    CHECK(s.grad_norm == w.grad_norm);
    CHECK(s.lr == w.lr);
    CHECK(s.global_batch_size == w.global_batch_size);
    CHECK(s.consumed_samples == w.consumed_samples);
  }
  // (The end of a shorter part adds an evaluation the whole run has not: it reads ahead without
  // moving the validation position, Megatron-LM's rule.)
  int64_t compared = 0;
  for (const EvalStats& e : part.evals) {
    INFO("evaluation after iteration " << e.iteration);
    for (const EvalStats& w : whole.evals)
      if (w.iteration == e.iteration) {
        CHECK(e.loss == w.loss);
        ++compared;
      }
  }
  CHECK(compared >= static_cast<int64_t>(part.evals.size()) - 1);
}

}  // namespace

TEST_CASE("a resumed run is bit-identical to one that never stopped - sync and async saves") {
  Fixture f;
  const Run whole = f.run(14, "whole");
  REQUIRE(whole.stats.size() == 14);
  for (const char* async : {"false", "true"}) {
    INFO("checkpoint.async " << async);
    const std::string ck = f.dir.file(std::string("ck-") + async);
    const std::vector<std::string> sets = {"checkpoint.dir=" + ck, "checkpoint.resume=true",
                                           "checkpoint.save_interval=4",
                                           std::string("checkpoint.async=") + async};
    // Stops after 7 (the ramp has reached its full batch; 6 had an evaluation), resumes to 14.
    const Run first = f.run(7, std::string("part-") + async, sets);
    CHECK(first.iteration == 7);
    check_same(whole, first);
    CHECK(committed_iterations(ck) == std::vector<int64_t>{4, 7});
    // Saving iterations carry the stall; others do not.
    CHECK(first.stats[3].checkpoint_stall_ms >= 0);
    CHECK(first.stats[4].checkpoint_stall_ms < 0);
    const Run second = f.run(14, std::string("part-") + async, sets);
    REQUIRE(second.stats.size() == 7);
    CHECK(second.stats.front().iteration == 8);
    check_same(whole, second);
    // The metrics file reads as one run: 14 train lines and the evaluations after 3, 6, 7 (the
    // end of the first part), 9, 12 and 14.
    const std::string m =
        test::read_file(f.dir.file(std::string("part-") + async + "/metrics.jsonl"));
    CHECK(std::count(m.begin(), m.end(), '\n') == 14 + 6);
  }
}

TEST_CASE(
    "a stop signal saves at the iteration boundary and stops - without a dir nothing is saved") {
  Fixture f;
  install_stop_signal_handlers();
  const std::string ck = f.dir.file("ck");
  std::raise(SIGUSR1);
  const Run stopped = f.run(10, "stopped", {"checkpoint.dir=" + ck});
  clear_stop_signal();
  CHECK(stopped.stop == StopReason::kSignal);
  CHECK(stopped.iteration == 1);
  CHECK(read_latest(ck) == 1);
  const Run whole = f.run(10, "whole");
  const Run resumed = f.run(10, "stopped", {"checkpoint.dir=" + ck, "checkpoint.resume=true"});
  CHECK(resumed.stop == StopReason::kFinished);
  CHECK(resumed.stats.front().iteration == 2);
  check_same(whole, resumed);

  std::raise(SIGTERM);
  const Run unsaved = f.run(10, "unsaved");
  clear_stop_signal();
  CHECK(unsaved.stop == StopReason::kSignal);
  CHECK(unsaved.iteration == 1);
}

TEST_CASE("checkpoint.load with load_optimizer false starts a fine-tune from the weights alone") {
  Fixture f;
  const std::string ck = f.dir.file("ck");
  f.run(5, "base", {"checkpoint.dir=" + ck});
  const Run tuned = f.run(3, "tuned", {"checkpoint.load=" + ck, "checkpoint.load_optimizer=false"});
  REQUIRE(tuned.stats.size() == 3);
  CHECK(tuned.stats.front().iteration == 1);
  CHECK(tuned.stats.front().consumed_samples == 2);  // data from the start
  const Run fresh = f.run(3, "fresh");
  CHECK(tuned.stats.front().loss < fresh.stats.front().loss - 0.05);  // trained weights
  // With the optimizer too, it continues the run.
  const Run cont = f.run(7, "cont", {"checkpoint.load=" + ck + "/iter_0000005"});
  CHECK(cont.stats.front().iteration == 6);
}

namespace {

// Every element of each named state tensor, as floats, in registration order.
std::vector<float> floats(const std::vector<StateTensor>& state, const std::string& prefix) {
  std::vector<float> out;
  for (const StateTensor& s : state) {
    if (!s.name.starts_with(prefix)) continue;
    for (int64_t i = 0; i < s.tensor.numel(); ++i)
      out.push_back(s.tensor.dtype() == DType::kBF16
                        ? static_cast<float>(s.tensor.data_as<Bf16>()[i])
                        : s.tensor.data_as<float>()[i]);
  }
  return out;
}

}  // namespace

TEST_CASE("checkpoints load across precisions - the fp32 weights are the saved masters") {
  Fixture f;
  SECTION("bf16 saved, fp32 resumed: weights from the masters, not the rounded weights") {
    const std::string ck = f.dir.file("ck-bf16");
    Trainer bf(f.recipe(3, "bf", {"precision=bf16", "checkpoint.dir=" + ck}),
               TrainerOptions{2, true});
    bf.run();
    const std::vector<float> masters = floats(bf.optimizer().state(), "master.");
    const std::vector<float> rounded = floats(bf.model().params().state(), "");
    REQUIRE(masters.size() == rounded.size());
    REQUIRE(masters != rounded);  // the masters carry bits the bf16 weights lost
    Trainer fp(f.recipe(3, "fp", {"checkpoint.dir=" + ck, "checkpoint.resume=true"}),
               TrainerOptions{2, true});
    CHECK(fp.iteration() == 3);
    CHECK((floats(fp.model().params().state(), "") == masters));
  }
  SECTION("fp32 saved, bf16 resumed: the fp32 weights become the masters, rounded the weights") {
    const std::string ck = f.dir.file("ck-fp32");
    Trainer fp(f.recipe(3, "fp", {"checkpoint.dir=" + ck}), TrainerOptions{2, true});
    fp.run();
    const std::vector<float> weights = floats(fp.model().params().state(), "");
    Trainer bf(
        f.recipe(3, "bf", {"precision=bf16", "checkpoint.dir=" + ck, "checkpoint.resume=true"}),
        TrainerOptions{2, true});
    CHECK((floats(bf.optimizer().state(), "master.") == weights));
    std::vector<float> want;
    for (float w : weights) want.push_back(static_cast<float>(Bf16(w)));
    CHECK((floats(bf.model().params().state(), "") == want));
  }
}

TEST_CASE("a checkpoint of another model shape is refused naming the key") {
  Fixture f;
  const std::string ck = f.dir.file("ck");
  f.run(2, "base", {"checkpoint.dir=" + ck});
  try {
    f.run(4, "other", {"checkpoint.dir=" + ck, "checkpoint.resume=true", "model.hidden_size=128"});
    FAIL("resumed a checkpoint of another shape");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);  // a setting, not a damaged file: exit 2
    CHECK(e.context() == "model.hidden_size");
    CHECK_THAT(e.message(), Catch::Contains("set model.hidden_size: 64"));
  }
  // A fresh run (resume false) into that directory: refused, naming it and both ways out.
  try {
    f.run(4, "fresh", {"checkpoint.dir=" + ck});
    FAIL("a fresh run wrote into another run's checkpoint directory");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK(e.context() == "checkpoint.dir");
    CHECK_THAT(e.message(), Catch::Contains("latest iter_0000002") &&
                                Catch::Contains("checkpoint.resume: true") &&
                                Catch::Contains("a new checkpoint.dir"));
  }
  // A changed seq_length is named as such (max_position_embeddings follows it by default).
  try {
    f.run(4, "seq", {"checkpoint.dir=" + ck, "checkpoint.resume=true", "model.seq_length=16"});
    FAIL("resumed a checkpoint with another seq_length");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kInvalidArgument);
    CHECK(e.context() == "model.seq_length");
  }
  // Weights only: the position table must still match.
  try {
    f.run(4, "pos",
          {"checkpoint.load=" + ck, "checkpoint.load_optimizer=false", "model.seq_length=16"});
    FAIL("loaded a checkpoint with another max_position_embeddings");
  } catch (const Error& e) {
    CHECK(e.context() == "model.max_position_embeddings");
    CHECK_THAT(e.message(), Catch::Contains("(it defaults to model.seq_length)"));
  }
  try {
    f.run(4, "none", {"checkpoint.load=" + f.dir.file("nothing-here")});
    FAIL("loaded a missing checkpoint");
  } catch (const Error& e) {
    CHECK(e.code() == Code::kNotFound);
    CHECK(e.context() == "checkpoint.load");
  }
}
