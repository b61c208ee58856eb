// mtnlg-ckpt: inspect, verify, pin, export, import and reshard mtnlg-train checkpoints.
// Exit status: 0 done; 2 a bad command line (or a layout that does not divide the model);
// 3 a Megatron checkpoint this cannot import as it is (the message says why); 4 a missing,
// corrupt or unreadable checkpoint or file (the message names it); 1 anything else.
#include <CLI/CLI.hpp>

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/offline.h"
#include "cmd/cli_parse.h"
#include "cmd/megatron_checkpoint.h"
#include "core/logging.h"
#include "core/status.h"

namespace {

// "T,P,D" (or "T,P"): `count` positive integers; invalid_argument naming --layout otherwise.
std::vector<int64_t> parse_layout(const std::string& layout, size_t count) {
  std::vector<int64_t> sizes;
  std::stringstream ss(layout);
  std::string part;
  while (std::getline(ss, part, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(part, &used);
      if (used != part.size() || v < 1) throw std::invalid_argument(part);
      sizes.push_back(v);
    } catch (const std::exception&) {
      sizes.clear();
      break;
    }
  }
  if (sizes.size() != count)
    throw mtnlg::invalid_argument("--layout '" + layout + "' is not " +
                                      (count == 3 ? "T,P,D (three positive integers, e.g. 2,2,1)"
                                                  : "T,P (two positive integers, e.g. 2,2)"),
                                  "--layout");
  return sizes;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "mtnlg-ckpt: inspect, verify, pin, export, import and reshard mtnlg-train checkpoints.\n"
      "DIR is a checkpoint root (checkpoint.dir: its latest committed checkpoint) or one "
      "iter_NNNNNNN directory.\n"
      "Megatron-LM checkpoints (in: the legacy torch format and torch_dist; out: the legacy "
      "torch format) go in and out through "
      "scripts/megatron_ckpt.py and Debian's PyTorch (python3-torch); MTNLG_SCRIPTS_DIR names "
      "another scripts/ directory.\n"
      "Exit status: 0 done; 2 bad command line or layout; 3 a Megatron checkpoint that cannot "
      "be imported as it is (flags without a recipe key, optimizer state in a layout it does not "
      "know); 4 missing, corrupt or unreadable checkpoint (the message names the file); "
      "1 other."};
  app.set_version_flag("--version", "mtnlg-ckpt 0.1.0");
  app.require_subcommand(1);
  std::string dir;

  auto* inspect = app.add_subcommand(
      "inspect", "Print the iteration, layout, consumed samples and tokens, files and tensors");
  inspect->add_option("DIR", dir, "checkpoint root or iter_NNNNNNN directory")->required();

  auto* verify = app.add_subcommand(
      "verify", "Check that every file the manifest lists is present with its size and checksum");
  verify->add_option("DIR", dir, "checkpoint root or iter_NNNNNNN directory")->required();

  std::string note;
  auto* pin = app.add_subcommand(
      "pin",
      "Pin a checkpoint: checkpoint.keep_last never deletes it, and a run that saves over its "
      "iteration (after a rollback) keeps it aside as iter_NNNNNNN.pinned-N. Writes pinned.txt "
      "into it (the same as writing that file by hand)");
  pin->add_option("DIR", dir, "checkpoint root (its latest) or iter_NNNNNNN directory")->required();
  pin->add_option("--note", note, "why it is kept, shown by inspect");
  auto* unpin = app.add_subcommand("unpin", "Remove a checkpoint's pin (pinned.txt)");
  unpin->add_option("DIR", dir, "checkpoint root (its latest) or iter_NNNNNNN directory")
      ->required();

  std::string format = "hf-gpt2", output;
  auto* exp = app.add_subcommand(
      "export",
      "Gather the tensor and pipeline shards into one Hugging Face GPT-2 safetensors file "
      "(vocabulary unpadded, Conv1D layout) with config.json and the tokenizer (vocab.json, "
      "merges.txt, tokenizer_config.json) beside it: a whole Hugging Face model directory; "
      "model.init_from reads it");
  exp->add_option("DIR", dir, "checkpoint root or iter_NNNNNNN directory")->required();
  exp->add_option("--format", format,
                  "hf-gpt2 (the default), or megatron: a Megatron-LM checkpoint root in its "
                  "torch format (iter_NNNNNNN/mp_rank_TT[_PPP]/model_optim_rng.pt and "
                  "latest_checkpointed_iteration.txt) with Adam's state, the iteration, the "
                  "consumed samples, the LR schedule's state and the RNG state, for Megatron's "
                  "--load with --ckpt-format torch")
      ->check(CLI::IsMember({"hf-gpt2", "megatron"}))
      ->capture_default_str();
  exp->add_option("--output", output,
                  "FILE.safetensors to write (hf-gpt2), or the Megatron checkpoint root (megatron)")
      ->required();
  std::string megatron_layout = "1,1";
  exp->add_option("--layout", megatron_layout,
                  "T,P: Megatron's tensor and pipeline sizes (megatron; default 1,1)");
  std::string transformer_impl = "transformer_engine";
  exp->add_option("--transformer-impl", transformer_impl,
                  "the Megatron model the checkpoint is for (megatron), as Megatron's own "
                  "--transformer-impl: transformer_engine (Megatron-Core's default: norms fused "
                  "into linear_qkv and linear_fc1), local (Megatron-Core's local spec: "
                  "input_layernorm, pre_mlp_layernorm), or legacy (the legacy GPTModel's names, "
                  "for Megatron-LM before 2025 with --use-legacy-models)")
      ->check(CLI::IsMember({"transformer_engine", "local", "legacy"}))
      ->capture_default_str();
  bool export_force = false;
  exp->add_flag("--force", export_force, "write into a --output that is not empty (megatron)");
  std::string vocab_file, merge_file;
  exp->add_option("--vocab-file", vocab_file,
                  "GPT-2 encoder.json to export as vocab.json (default: the checkpoint's own "
                  "tokenizer/vocab.json)");
  exp->add_option("--merge-file", merge_file,
                  "GPT-2 vocab.bpe to export as merges.txt (default: the checkpoint's own)");

  mtnlg::MegatronImport imp;
  std::string import_format, import_layout;
  auto* import = app.add_subcommand(
      "import",
      "Convert a Megatron-LM GPT checkpoint (the legacy torch format: iter_NNNNNNN/"
      "mp_rank_TT[_PPP]/model_optim_rng.pt, any tensor and pipeline split; or torch_dist: "
      "iter_NNNNNNN/.metadata and *.distcp; the legacy GPTModel's names or Megatron-Core's) into "
      "a committed checkpoint: the weights (the fp32 masters where the run kept them), Adam's "
      "moments and step (Megatron's non-distributed optimizer, and the distributed optimizer: "
      "distrib_optim.pt beside each rank's file, in torch_dist its dp_reshardable buckets or "
      "its fully reshardable state), the iteration and "
      "the consumed samples, and "
      "the recipe rebuilt from the run's arguments as mtnlg-recipe from-megatron builds it. "
      "mtnlg-train continues from it with checkpoint.dir (or checkpoint.load) set to --output");
  import->add_option("DIR", imp.source, "the Megatron checkpoint root or iter_NNNNNNN directory")
      ->required();
  import->add_option("--format", import_format, "megatron")
      ->check(CLI::IsMember({"megatron"}))
      ->required();
  import->add_option("--output", imp.output, "the checkpoint root to write")->required();
  import->add_option("--layout", import_layout,
                     "T,P,D: tensor, pipeline and data-parallel sizes to write (default: the "
                     "Megatron checkpoint's tensor and pipeline sizes, data 1)");
  import->add_option("--zero-stage", imp.zero_stage, "0 (default) or 1")->check(CLI::Range(0, 1));
  import->add_flag("--weights-only", imp.weights_only,
                   "import the weights alone (a checkpoint saved without the optimizer, or "
                   "whose optimizer state is in a layout the import refuses: the distributed "
                   "optimizer's format of before February 2024, buffers laid out otherwise "
                   "than its args say)");
  import->add_flag("--allow-dropped", imp.allow_dropped,
                   "import although the run used flags without a recipe key (each is printed)");
  import->add_option("--set", imp.sets,
                     "key.path=value: a recipe override (e.g. data.blend paths of this machine)");
  std::string import_vocab, import_merge;
  import->add_option("--vocab-file", import_vocab,
                     "GPT-2 encoder.json to carry inside (default: the run's --vocab-file where "
                     "this machine has it)");
  import->add_option("--merge-file", import_merge, "GPT-2 vocab.bpe to carry inside");
  import->add_flag("--force", imp.force, "write into a --output that is not empty");

  std::string layout;
  int zero_stage = -1;
  auto* convert = app.add_subcommand(
      "convert",
      "Reshard offline to another (tensor, pipeline, data) layout, optimizer state included; the "
      "result is a committed checkpoint of the same iteration under --output");
  convert->add_option("DIR", dir, "checkpoint root or iter_NNNNNNN directory")->required();
  convert->add_option("--output", output, "DIR2: the checkpoint root to write")->required();
  convert->add_option("--layout", layout, "T,P,D: tensor, pipeline and data-parallel sizes")
      ->required();
  convert->add_option("--zero-stage", zero_stage, "0 or 1 (default: the checkpoint's)")
      ->check(CLI::Range(0, 1));
  bool force = false;
  convert->add_flag("--force", force,
                    "Write into a --output that is not empty (its checkpoint of the same "
                    "iteration is replaced and its latest moved to it)");
  bool no_progress_bar = false;
  convert->add_flag("--no-progress-bar", no_progress_bar,
                    "Progress as plain log lines (each tenth of the shard files, shown at "
                    "--log-level info) even when stderr is a terminal, where a bar is drawn "
                    "otherwise");

  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "trace, debug, info, warn (default), error or off");
  if (const auto status = mtnlg::parse_command_line(app, argc, argv)) return *status;
  try {
    mtnlg::init_logging(log_level);
    if (*inspect) {
      mtnlg::inspect_checkpoint(dir, std::cout);
    } else if (*verify) {
      mtnlg::verify_checkpoint(dir, std::cout);
    } else if (*pin) {
      std::cout << "pinned " << mtnlg::pin_checkpoint(dir, note) << "\n";
    } else if (*unpin) {
      std::cout << "unpinned " << mtnlg::unpin_checkpoint(dir) << "\n";
    } else if (*exp && format == "megatron") {
      const std::vector<int64_t> sizes = parse_layout(megatron_layout, 2);
      std::cout << mtnlg::export_megatron_checkpoint(dir, output, sizes[0], sizes[1], export_force,
                                                     transformer_impl)
                << "\n";
    } else if (*import) {
      if (import_vocab.empty() != import_merge.empty())
        throw mtnlg::invalid_argument(
            "--vocab-file and --merge-file go together (a GPT-2 tokenizer is both files)",
            import_vocab.empty() ? "--vocab-file" : "--merge-file");
      if (!import_vocab.empty()) imp.tokenizer = mtnlg::TokenizerFiles{import_vocab, import_merge};
      if (!import_layout.empty()) {
        const std::vector<int64_t> sizes = parse_layout(import_layout, 3);
        imp.tensor = sizes[0];
        imp.pipeline = sizes[1];
        imp.data = sizes[2];
      }
      std::cout << mtnlg::import_megatron_checkpoint(imp) << "\n";
    } else if (*exp) {
      if (vocab_file.empty() != merge_file.empty())
        throw mtnlg::invalid_argument(
            "--vocab-file and --merge-file go together (a GPT-2 tokenizer is both files)",
            vocab_file.empty() ? "--vocab-file" : "--merge-file");
      const bool tok = mtnlg::export_checkpoint_hf_gpt2(
          dir, output,
          vocab_file.empty() ? std::nullopt
                             : std::optional<mtnlg::TokenizerFiles>({vocab_file, merge_file}));
      std::cout << "wrote " << output << " and config.json beside it"
                << (tok ? ", with the tokenizer (vocab.json, merges.txt, tokenizer_config.json)"
                        : "; no tokenizer (the checkpoint carries none: pass --vocab-file and "
                          "--merge-file)")
                << "\n";
    } else if (*convert) {
      const std::vector<int64_t> sizes = parse_layout(layout, 3);
      mtnlg::convert_checkpoint(
          dir, output, sizes[0], sizes[1], sizes[2], zero_stage, force,
          no_progress_bar ? mtnlg::ProgressMode::kLines : mtnlg::ProgressMode::kAuto);
      std::cout << "wrote a checkpoint at tensor " << sizes[0] << " x pipeline " << sizes[1]
                << " x data " << sizes[2] << " under " << output << "\n";
    }
    return 0;
  } catch (const mtnlg::Error& e) {
    std::cerr << "mtnlg-ckpt: " << e.what() << "\n";
    return mtnlg::exit_status(e.code());
  } catch (const std::exception& e) {
    std::cerr << "mtnlg-ckpt: " << e.what() << "\n";
    return 1;
  }
}
