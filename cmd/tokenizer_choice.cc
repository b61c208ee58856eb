#include "cmd/tokenizer_choice.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "checkpoint/checkpoint_dir.h"
#include "core/status.h"
#include "data/gpt2_tokenizer.h"

namespace mtnlg {

namespace fs = std::filesystem;

namespace {

constexpr const char* kShippedVocab = "data/gpt2/encoder.json";
constexpr const char* kShippedMerges = "data/gpt2/vocab.bpe";

// The tokenizer that travels with the model, if any.
std::optional<TokenizerFiles> model_tokenizer(const ModelSource& source) {
  std::error_code ec;
  if (!source.checkpoint.empty()) {
    const std::optional<std::string> dir = find_checkpoint(source.checkpoint);
    return dir ? checkpoint_tokenizer(*dir) : std::nullopt;
  }
  if (!source.hf_model.empty()) {
    const fs::path dir = fs::path(source.hf_model).parent_path();
    if (fs::is_regular_file(dir / "vocab.json", ec) && fs::is_regular_file(dir / "merges.txt", ec))
      return TokenizerFiles{(dir / "vocab.json").string(), (dir / "merges.txt").string()};
  }
  return std::nullopt;
}

}  // namespace

TokenizerFiles choose_tokenizer(const std::string& vocab_flag, const std::string& merge_flag,
                                const ModelSource& source) {
  const std::optional<TokenizerFiles> inside = model_tokenizer(source);
  std::error_code ec;
  const auto pick = [&](const std::string& given, const std::string* inside_file, const char* flag,
                        const char* shipped) {
    if (!given.empty()) return given;
    if (inside_file != nullptr) return *inside_file;
    if (fs::exists(shipped, ec)) return std::string(shipped);
    throw invalid_argument(std::string(flag) +
                               " is required: the model carries no tokenizer and "
                               "there is no " +
                               shipped + " in the current directory; the fix: pass " + flag +
                               " PATH (e.g. the repository's " + shipped + ")",
                           flag);
  };
  return TokenizerFiles{
      pick(vocab_flag, inside ? &inside->vocab_file : nullptr, "--vocab-file", kShippedVocab),
      pick(merge_flag, inside ? &inside->merge_file : nullptr, "--merge-file", kShippedMerges)};
}

std::optional<TokenizerFiles> run_tokenizer(const Recipe& r) {
  const TokenizerConfig& t = r.tokenizer;
  if (!t.vocab_file.empty()) {
    const auto tok = Gpt2Tokenizer::load(t.vocab_file, t.merge_file);
    if (tok->vocab_size() > r.model.vocab_size)
      throw invalid_argument(
          "tokenizer.vocab_file " + t.vocab_file + " has " + std::to_string(tok->vocab_size()) +
              " tokens but model.vocab_size is " + std::to_string(r.model.vocab_size) +
              "; the fix: the tokenizer the data was made with, or "
              "model.vocab_size: " +
              std::to_string(tok->vocab_size()),
          "tokenizer.vocab_file");
    return TokenizerFiles{t.vocab_file, t.merge_file};
  }
  std::error_code ec;
  if (!fs::exists(kShippedVocab, ec) || !fs::exists(kShippedMerges, ec)) {
    spdlog::info("checkpoint: no tokenizer to carry (tokenizer.vocab_file unset, no {} here)",
                 kShippedVocab);
    return std::nullopt;
  }
  const auto tok = Gpt2Tokenizer::load(kShippedVocab, kShippedMerges);
  if (tok->vocab_size() != r.model.vocab_size) {
    spdlog::info(
        "checkpoint: no tokenizer to carry ({} has {} tokens, model.vocab_size is {}; set "
        "tokenizer.vocab_file and merge_file to the data's)",
        kShippedVocab, tok->vocab_size(), r.model.vocab_size);
    return std::nullopt;
  }
  return TokenizerFiles{fs::absolute(kShippedVocab).string(),
                        fs::absolute(kShippedMerges).string()};
}

}  // namespace mtnlg
