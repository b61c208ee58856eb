// Megatron-LM checkpoints in and out (mtnlg-ckpt import / export --format megatron).
//
// Megatron's legacy `torch` checkpoints are pickles of PyTorch tensors and an argparse
// Namespace: reading them in C++ would mean reimplementing pickle, so Debian's PyTorch does it in
// scripts/megatron_ckpt.py, which turns a checkpoint into Hugging Face GPT-2-layout files (the
// weights, or the fp32 masters where the run kept them, and Adam's two moments) and
// megatron.json (the iteration, the data position, Adam's step, the learning rate and the run's
// pretrain_gpt.py flags rebuilt from its args), and back. This side turns those flags into a
// recipe as `mtnlg-recipe from-megatron` does, loads the tensors through the Hugging Face
// importer (checkpoint/hf_import.h, which checks every shape against the recipe's model), writes
// one whole checkpoint and reshards it to the layout asked for (convert_checkpoint). The script
// is found in MTNLG_SCRIPTS_DIR (the environment), else in the source tree this was built from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/tokenizer_files.h"

namespace mtnlg {

struct MegatronImport {
  std::string source;  // a Megatron checkpoint root or iter_NNNNNNN directory
  std::string output;  // the checkpoint root to write
  // The layout to write; 0: the Megatron checkpoint's tensor and pipeline sizes.
  int64_t tensor = 0, pipeline = 0, data = 1;
  int zero_stage = 0;
  bool weights_only = false;      // no optimizer state (none saved, or one refused)
  bool allow_dropped = false;     // import although some of the run's flags have no recipe key
  bool force = false;             // write into an --output that is not empty
  std::vector<std::string> sets;  // recipe overrides, --set syntax
  std::optional<TokenizerFiles> tokenizer;  // else the run's own files where they exist here
};

// Imports; returns a one-line summary. Throws invalid_argument (a bad layout or output),
// unsupported naming the flags a recipe cannot reproduce (unless allow_dropped), not_found /
// corruption naming the file for a missing or unreadable checkpoint, and what the script
// reports with its exit status (2: unsupported input; 4: missing or unreadable).
std::string import_megatron_checkpoint(const MegatronImport& options);

// Writes checkpoint `path` (any layout) as a Megatron checkpoint under `output` at tensor x
// pipeline: the weights (bf16 with fp32 masters for a bf16 recipe), Adam's moments and step, the
// iteration and the consumed samples, the LR schedule's state and the RNG state Megatron seeds,
// for Megatron's --load. transformer_impl names the model the checkpoint is for, as Megatron's
// --transformer-impl does: "transformer_engine" or "local" (Megatron-Core's names), or "legacy"
// (the legacy GPTModel's, --use-legacy-models). Returns a one-line summary.
std::string export_megatron_checkpoint(const std::string& path, const std::string& output,
                                       int64_t tensor, int64_t pipeline, bool force,
                                       const std::string& transformer_impl);

}  // namespace mtnlg
