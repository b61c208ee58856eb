// Offline checkpoint work (mtnlg-ckpt): describe, verify, export to Hugging Face GPT-2, and
// reshard to another layout. Each reads through ShardIndex, the code the trainer loads with, so a
// checkpoint converted offline is the checkpoint the trainer would have resharded online.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"
#include "checkpoint/tokenizer_files.h"
#include "core/config/recipe.h"
#include "core/progress.h"
#include "model/gpt_stage.h"

namespace mtnlg {

// A checkpoint's whole model, gathered from its shards (any tensor and pipeline layout) into one
// f32 stage on `backend` (a CPU backend), and the recipe it was trained with, at tensor 1 and
// pipeline 1 (and `overrides`, --set syntax, e.g. "model.seq_length=512" to run other lengths).
// Errors as require_checkpoint and the shard reader (a missing or corrupt file).
struct GatheredModel {
  Recipe recipe;
  std::unique_ptr<GPTStage> model;
};
GatheredModel load_checkpoint_model(const std::string& path, Backend& backend,
                                    const std::vector<std::string>& overrides = {});

// Which part of a model one rank of a (tensor x pipeline) split holds, one chunk a stage.
struct StageLayout {
  int64_t tensor = 1, tensor_rank = 0;
  int64_t pipeline = 1, stage = 0;
  Communicator* tensor_group = nullptr;  // tensor > 1: its group (borrowed)
};
// A checkpoint's model as `layout`'s stage in `dtype` on `backend` (any device), read from the
// layout it was saved in (the shard reader reshards); sequence parallelism off. Throws as
// load_checkpoint_model, and invalid_argument naming parallel.tensor / parallel.pipeline when the
// model does not divide.
GatheredModel load_checkpoint_stage(const std::string& path, Backend& backend,
                                    const StageLayout& layout, DType dtype,
                                    const std::vector<std::string>& overrides = {});

// PATH (an iter_NNNNNNN directory or a root) to its checkpoint directory; not_found if none.
std::string require_checkpoint(const std::string& path);

// The recipe checkpoint `path` was trained with (its manifest's, with `overrides`), without its
// weights: what to make a backend for before the model is read. Errors as require_checkpoint
// and the recipe's (naming the manifest).
Recipe read_checkpoint_recipe(const std::string& path,
                              const std::vector<std::string>& overrides = {});

// Iteration, layout, data position, files and every model tensor with its global shape.
void inspect_checkpoint(const std::string& path, std::ostream& out);

// Every listed file present with its recorded size and checksum; the manifest parses. Throws the
// first problem (naming the file); prints one line per file checked.
void verify_checkpoint(const std::string& path, std::ostream& out);

// Pins the checkpoint `path` means (writes kPinFile with `note` into it): checkpoint.keep_last
// never deletes it, and a run that saves over its iteration keeps it aside. Returns its directory.
std::string pin_checkpoint(const std::string& path, const std::string& note);
// Removes a pin; returns the directory (a checkpoint without one is left as it is).
std::string unpin_checkpoint(const std::string& path);

// The whole model gathered from the shards into one Hugging Face GPT-2 safetensors file
// (vocabulary unpadded, Conv1D layout; model.init_from reads it back) and config.json beside it,
// with the tokenizer (vocab.json, merges.txt, tokenizer_config.json): `tokenizer` when given,
// else the checkpoint's own. Returns whether a tokenizer was written (a checkpoint without one,
// and none given: config and weights alone).
// Hugging Face's GPT2Config (config.json) for `r`'s model.
std::string hf_gpt2_config_json(const Recipe& r);

bool export_checkpoint_hf_gpt2(const std::string& path, const std::string& output,
                               const std::optional<TokenizerFiles>& tokenizer = std::nullopt);

// The checkpoint resharded to (tensor, pipeline, data) with ZeRO stage `zero_stage` (-1: the
// source's), written and committed under `out_root` as the same iteration. Throws
// invalid_argument for an out_root that exists and is not empty (another run's checkpoints
// would be replaced and its latest moved) unless `force`. `progress`: how the shard files
// written so far are shown (core/progress.h; mtnlg-ckpt convert draws a bar on a terminal).
void convert_checkpoint(const std::string& path, const std::string& out_root, int64_t tensor,
                        int64_t pipeline, int64_t data, int zero_stage, bool force = false,
                        ProgressMode progress = ProgressMode::kNone);

// The model keys a checkpoint's tensors depend on, as `r` sets them.
ManifestModel manifest_model(const Recipe& r);

// A whole model (tensor 1, pipeline 1, `model`) and, when given, Adam's moments (models of the
// same shape holding them), written and committed under `root` as a checkpoint of `m`'s
// iteration and position: the layout, the model keys, the files and the recipe (`recipe` at
// tensor, pipeline and data 1, ZeRO 0) are set here, and the tokenizer when given. For
// importers; convert_checkpoint then reshards it.
void write_whole_checkpoint(const std::string& root, CheckpointManifest m, const Recipe& recipe,
                            GPTStage& model, GPTStage* exp_avg, GPTStage* exp_avg_sq,
                            const std::optional<TokenizerFiles>& tokenizer);

}  // namespace mtnlg
