// mtnlg-ckpt: inspect, verify, pin, export and reshard mtnlg-train checkpoints.
// Exit status: 0 done; 2 a bad command line (or a layout that does not divide the model);
// 4 a missing, corrupt or unreadable checkpoint or file (the message names it); 1 anything else.
#include <CLI/CLI.hpp>

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/offline.h"
#include "cmd/cli_parse.h"
#include "core/logging.h"
#include "core/status.h"

int main(int argc, char** argv) {
  CLI::App app{
      "mtnlg-ckpt: inspect, verify, pin, export and reshard mtnlg-train checkpoints.\n"
      "DIR is a checkpoint root (checkpoint.dir: its latest committed checkpoint) or one "
      "iter_NNNNNNN directory.\n"
      "Exit status: 0 done; 2 bad command line or layout; 4 missing, corrupt or unreadable "
      "checkpoint (the message names the file); 1 other."};
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
  exp->add_option("--format", format, "output format (hf-gpt2)")
      ->check(CLI::IsMember({"hf-gpt2"}))
      ->capture_default_str();
  exp->add_option("--output", output, "FILE.safetensors to write")->required();
  std::string vocab_file, merge_file;
  exp->add_option("--vocab-file", vocab_file,
                  "GPT-2 encoder.json to export as vocab.json (default: the checkpoint's own "
                  "tokenizer/vocab.json)");
  exp->add_option("--merge-file", merge_file,
                  "GPT-2 vocab.bpe to export as merges.txt (default: the checkpoint's own)");

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
      if (sizes.size() != 3)
        throw mtnlg::invalid_argument(
            "--layout '" + layout + "' is not T,P,D (three positive integers, e.g. 2,2,1)",
            "--layout");
      mtnlg::convert_checkpoint(dir, output, sizes[0], sizes[1], sizes[2], zero_stage, force);
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
