// The tokenizer a checkpoint was trained with, inside it, in the Hugging Face layout:
//
//   iter_NNNNNNN/tokenizer/vocab.json             GPT-2's encoder.json, byte for byte
//   iter_NNNNNNN/tokenizer/merges.txt             GPT-2's vocab.bpe, byte for byte
//   iter_NNNNNNN/tokenizer/tokenizer_config.json  GPT2Tokenizer, <|endoftext|>, model_max_length
//
// each listed in the manifest with its size and checksum. mtnlg-generate, mtnlg-eval and
// mtnlg-ckpt export take it from there by default, so a checkpoint works from any directory, and
// an HF export is a whole model (config, weights, tokenizer). Only bytes here: the tokenizer
// itself is data/gpt2_tokenizer.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/manifest.h"

namespace mtnlg {

inline constexpr const char* kTokenizerDir = "tokenizer";

// A GPT-2 BPE tokenizer's two files (encoder.json / vocab.json and vocab.bpe / merges.txt).
struct TokenizerFiles {
  std::string vocab_file, merge_file;
};

// Writes vocab.json, merges.txt and tokenizer_config.json into `dir` (created; each file
// atomically) from `source`; returns their entries, named relative to `base` (so "tokenizer/
// vocab.json" when dir is base/tokenizer). A missing source file is not_found naming it.
std::vector<ManifestFile> write_tokenizer_files(const std::string& dir, const std::string& base,
                                                const TokenizerFiles& source,
                                                int64_t model_max_length);

// The tokenizer inside a committed checkpoint directory; nullopt for a checkpoint without one
// (saved before checkpoints carried it, or by a run that had none).
std::optional<TokenizerFiles> checkpoint_tokenizer(const std::string& checkpoint_dir);

// Whether a manifest entry is a tensor shard (model_/optim_ .safetensors), not another file.
bool is_shard_file(const ManifestFile& f);

// Checks the manifest's files that are not shards (the tokenizer's): present, of their size and
// checksum; not_found or corruption naming the file otherwise.
void verify_other_files(const std::string& checkpoint_dir, const CheckpointManifest& m);

}  // namespace mtnlg
