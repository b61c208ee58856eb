// `mtnlg-curate clean`: per-document normalization and filters before quality scoring and
// deduplication.
//
// Always: the text to NFC (ICU), and control characters (general category Cc) removed but tab
// and newline. Then the filters asked for, in this order, the first that fires removing the
// document (each named and counted in the report):
//   min_chars N          fewer than N characters (code points): Megatron's
//                        cleanup_fix_dataset.py remove_512 with N = 512
//   short_javascript N   fewer than N characters and "javascript" in the lower-cased text:
//                        remove_256_javascript with N = 256
//   min_gpt2_tokens N    fewer than N GPT-2 tokens, counted only for texts of fewer than 8 N
//                        characters, as Megatron's cleanup_dataset.py does (N = 128 there)
//   language             CLD2's most likely language (of the text as plain text) not one of
//                        --languages, or its share of the text (CLD2's percent / 100) below
//                        --min-language-score. Where Megatron used langdetect, the paper's
//                        pipeline asks for CLD2 (Debian's libcld2).
// Kept records are written with the cleaned text (other members carried); unchanged texts keep
// their line as it was.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/curate/text_records.h"
#include "data/preprocess_progress.h"

namespace mtnlg::curate {

struct CleanOptions {
  std::string input, output, report;
  std::vector<std::string> languages;  // ISO codes as CLD2 names them ("en", "de", "zh-Hant")
  double min_language_score = 0.0;
  int64_t min_chars = 0, short_javascript = 0, min_gpt2_tokens = 0;
  std::string vocab_file, merge_file;  // for min_gpt2_tokens
  std::string text_key = "text";
  BadRecords bad_records = BadRecords::kError;
  int threads = 0;
  ProgressMode progress = ProgressMode::kAuto;
};

struct CleanStats {
  int64_t documents = 0, kept = 0, normalized = 0, skipped = 0;
  std::map<std::string, int64_t> removed;  // by rule
  std::map<std::string, int64_t> languages;  // CLD2's top language of every document
  double seconds = 0;
};

CleanStats run_clean(const CleanOptions& o);

// NFC, and control characters but tab and newline removed.
std::string normalize_text(const std::string& utf8);
// CLD2's most likely language code of a text and its share (0 to 1).
std::pair<std::string, double> detect_language(const std::string& utf8);

}  // namespace mtnlg::curate
