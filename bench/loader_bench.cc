// mtnlg-bench-loader: how fast the data loader produces samples, against how fast the training
// step of the same recipe consumes them. The loader must stay well ahead (ratio >> 1) so its
// prefetch thread hides data preparation entirely.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cmd/cli_parse.h"
#include "cmd/trainer.h"
#include "core/logging.h"
#include "data/dataset_builder.h"
#include "data/loader.h"
#include "optim/batch_ramp.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"mtnlg-bench-loader: loader samples/s against the training step's consumption"};
  std::string config = "configs/demo-cpu.yaml";
  std::vector<std::string> overrides;
  int64_t loader_samples = 20000;
  int64_t train_iters = 3;
  int threads = 0;
  app.add_option("--config", config, "recipe (its data and model)")->capture_default_str();
  app.add_option("--set", overrides, "recipe override key.path=value (repeatable)");
  app.add_option("--samples", loader_samples, "samples the loader produces")->capture_default_str();
  app.add_option("--train-iters", train_iters, "training iterations timed")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads for training (default: all)");
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;

  try {
    mtnlg::init_logging("warn");
    const mtnlg::Recipe recipe = mtnlg::load_recipe(config, overrides);
    const int64_t seq = recipe.model.seq_length, micro = recipe.parallel.micro_batch_size;
    const int64_t global = recipe.batch.global_batch_size;

    // Loader alone, pulled as fast as it produces.
    const auto source =
        mtnlg::build_train_dataset(recipe.data, seq, loader_samples + global, mtnlg::Split::kTrain);
    mtnlg::LoaderOptions lo;
    lo.micro_batch_size = micro;
    lo.vocab_size = recipe.model.vocab_size;
    lo.source_name = "bench";
    auto t0 = std::chrono::steady_clock::now();
    {
      mtnlg::Loader loader(*source, lo, 0, [global](int64_t) { return global; });
      for (int64_t n = 0; n < loader_samples; n += micro) loader.next();
    }
    const double loader_rate = static_cast<double>(loader_samples) / seconds_since(t0);

    // The training step's consumption (after one warm-up iteration).
    mtnlg::Recipe run = recipe;
    run.schedule.train_iters = train_iters + 1;
    run.eval.interval = 0;
    mtnlg::Trainer trainer(run, mtnlg::TrainerOptions{threads, false});
    trainer.train_step();
    t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < train_iters; ++i) trainer.train_step();
    const double train_rate = static_cast<double>(global * train_iters) / seconds_since(t0);

    std::printf("%-28s %14s\n", "", "samples/s");
    std::printf("%-28s %14.1f\n", "loader (1 prefetch thread)", loader_rate);
    std::printf("%-28s %14.1f\n", "training step consumes", train_rate);
    std::printf("%-28s %13.0fx\n", "loader / training", loader_rate / train_rate);
    std::printf("recipe %s: seq %ld, micro-batch %ld, global batch %ld\n", config.c_str(),
                static_cast<long>(seq), static_cast<long>(micro), static_cast<long>(global));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mtnlg-bench-loader: %s\n", e.what());
    return 1;
  }
}
