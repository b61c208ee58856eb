// Which GPT-2 tokenizer files a tool or a training run uses.
//
// Tools (mtnlg-generate, mtnlg-eval): each flag as given, else the tokenizer inside the model
// (a checkpoint's tokenizer/ directory, or vocab.json + merges.txt beside a Hugging Face
// .safetensors, as mtnlg-ckpt export writes them), else data/gpt2/ in the current directory;
// otherwise invalid_argument naming the flag and the fix.
//
// Training: the recipe's tokenizer.vocab_file/merge_file (its vocabulary must fit
// model.vocab_size: invalid_argument naming the key otherwise), else data/gpt2/ when present and
// of exactly model.vocab_size tokens, else none (the checkpoints then carry no tokenizer; logged).
#pragma once

#include <optional>
#include <string>

#include "checkpoint/tokenizer_files.h"
#include "cmd/generate.h"
#include "core/config/recipe.h"

namespace mtnlg {

TokenizerFiles choose_tokenizer(const std::string& vocab_flag, const std::string& merge_flag,
                                const ModelSource& source);

std::optional<TokenizerFiles> run_tokenizer(const Recipe& r);

}  // namespace mtnlg
