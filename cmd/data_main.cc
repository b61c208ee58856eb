// mtnlg-data: look at a recipe's data before training on it. Subcommand `samples` prints the
// samples a run of the recipe reads, in training order (cmd/data_samples.h). Exit status as
// mtnlg-train's: 0 success; 2 a bad command line or recipe; 3 unsupported; 4 missing or corrupt
// data files; 1 anything else.
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "cmd/cli_parse.h"
#include "cmd/data_samples.h"
#include "core/config/recipe.h"
#include "core/logging.h"
#include "core/status.h"

int main(int argc, char** argv) {
  CLI::App app{
      "mtnlg-data: a recipe's data as a run of it reads them.\n"
      "Example: mtnlg-data samples --config configs/demo-cpu.yaml --count 4 --format text\n"
      "Exit status: 0 done; 2 bad command line or recipe; 3 unsupported; 4 missing or corrupt "
      "data file; 1 other."};
  app.set_version_flag("--version", "mtnlg-data 0.1.0");
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str();

  std::string config, split = "train", format = "ids", vocab_file, merge_file;
  std::vector<std::string> overrides;
  mtnlg::SampleQuery query;
  auto* samples = app.add_subcommand(
      "samples",
      "Print samples [start, start + count) of a split in the order training reads them, one "
      "per line: with --format ids the seq_length + 1 token ids separated by spaces (inputs, "
      "then the last label), with --format text the same tokens decoded by GPT-2's BPE as a "
      "JSON string. The order is the run's for any layout (sample i is the i-th of the global "
      "batch stream: iteration k reads [consumed, consumed + global batch)). The split is sized "
      "as the run sizes it (train: the run's tokens / seq_length; valid: every evaluation of "
      "the run; test: eval.iters global batches), and the index caches are built in "
      "data.cache_dir as the run would build them, so the run reuses them. Sample order matches "
      "Megatron-LM's for the same corpus, seed, split and sizes (docs/data.md: Sample order).");
  samples->add_option("-c,--config", config, "Recipe YAML file")->required();
  samples
      ->add_option("--set", overrides,
                   "Override a recipe key: --set key.path=value (value is YAML; repeatable), as "
                   "mtnlg-train's")
      ->allow_extra_args(false);
  samples->add_option("--split", split, "train, valid or test")
      ->check(CLI::IsMember({"train", "valid", "test"}))
      ->capture_default_str();
  samples->add_option("--start", query.start, "Index of the first sample in training order")
      ->check(mtnlg::non_negative_number())
      ->capture_default_str();
  samples->add_option("--count", query.count, "Number of samples to print")
      ->required()
      ->check(mtnlg::positive_number());
  samples->add_option("--format", format, "ids or text")
      ->check(CLI::IsMember({"ids", "text"}))
      ->capture_default_str();
  samples->add_option("--vocab-file", vocab_file,
                      "With --format text: GPT-2 encoder.json (default: data/gpt2/encoder.json "
                      "when run from the repository root)");
  samples->add_option("--merge-file", merge_file,
                      "With --format text: GPT-2 vocab.bpe merges (default: data/gpt2/vocab.bpe, "
                      "as --vocab-file)");
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;

  return mtnlg::exit_status_of([&] {
    mtnlg::init_logging(log_level);
    const mtnlg::Recipe recipe = mtnlg::load_recipe(config, overrides);
    query.split = split == "train"   ? mtnlg::Split::kTrain
                  : split == "valid" ? mtnlg::Split::kValid
                                     : mtnlg::Split::kTest;
    query.format = format == "text" ? mtnlg::SampleFormat::kText : mtnlg::SampleFormat::kIds;
    if (query.format == mtnlg::SampleFormat::kText) {
      query.vocab_file =
          mtnlg::vocabulary_path(vocab_file, "--vocab-file", "data/gpt2/encoder.json");
      query.merge_file = mtnlg::vocabulary_path(merge_file, "--merge-file", "data/gpt2/vocab.bpe");
    }
    mtnlg::print_samples(recipe, query, std::cout);
    if (!std::cout) throw mtnlg::io_error("could not write the samples to standard output");
    return 0;
  });
}
