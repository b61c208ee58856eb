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
//   gopher_*             the Gopher rules asked for (GopherRules below)
//   c4_*                 the C4 rules asked for (data/curate/c4_rules.h): they drop lines,
//                        counted by rule, and remove documents; the kept lines become the text
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

#include "data/curate/c4_rules.h"
#include "data/curate/nltk_tokenize.h"
#include "data/curate/text_records.h"
#include "data/preprocess_progress.h"

namespace mtnlg::curate {

// The Gopher rules (Rae et al. 2021, as DataTrove's GopherQualityFilter and
// GopherRepetitionFilter define them at its commit a649de7), each off unless its threshold is
// given (>= 0). Words are NLTK's word_tokenize with a Punkt model when one is given, as DataTrove
// tokenizes English; else the text's whitespace-separated tokens (Python's str.split()). The
// word bounds and the mean length count the words that are not DataTrove's punctuation alone;
// bullets are lines starting with '•' or '-'; the stop words are counted once each.
struct GopherRules {
  int64_t min_words = -1, max_words = -1;                       // gopher_short_doc, gopher_long_doc
  double min_mean_word_length = -1, max_mean_word_length = -1;  // chars per word
  double max_symbol_word_ratio = -1;     // '#' per word, or '...' and '…' per word
  double max_bullet_lines_ratio = -1;    // lines starting with '•' or '-' (after leading spaces)
  double max_ellipsis_lines_ratio = -1;  // lines ending with '...' or '…'
  double min_alpha_words_ratio = -1;     // words holding a letter
  int64_t min_stop_words = -1;           // distinct ones of: the be to of and that have with
  double max_dup_para_frac = -1, max_dup_para_char_frac = -1;   // paragraphs: split at \n{2,}
  double max_dup_line_frac = -1, max_dup_line_char_frac = -1;   // lines: split at \n+
  std::vector<std::pair<int, double>> max_top_ngram_char_frac;  // (n, fraction): 2-4 in Gopher
  std::vector<std::pair<int, double>> max_dup_ngram_char_frac;  // (n, fraction): 5-10 in Gopher
  bool any() const;
};

// Gopher's thresholds for every rule not set yet.
void apply_gopher_defaults(GopherRules* g);

// The name of the first Gopher rule a text breaks, or "". punkt: NLTK's words with this model
// (null: str.split()).
std::string gopher_verdict(const std::string& utf8, const GopherRules& g,
                           const PunktModel* punkt = nullptr);

struct CleanOptions {
  std::string input, output, report;
  std::vector<std::string> languages;  // ISO codes as CLD2 names them ("en", "de", "zh-Hant")
  double min_language_score = 0.0;
  int64_t min_chars = 0, short_javascript = 0, min_gpt2_tokens = 0;
  GopherRules gopher;
  C4Rules c4;
  std::string vocab_file, merge_file;  // for min_gpt2_tokens
  // NLTK's punkt_tab directory of a language: the Gopher rules' words and the C4 rules'
  // sentences as DataTrove's NLTK tokenizers give them ("": str.split() and the rule in c4_rules.h)
  std::string punkt_dir;
  std::string text_key = "text";
  BadRecords bad_records = BadRecords::kError;
  int threads = 0;
  ProgressMode progress = ProgressMode::kAuto;
};

struct CleanStats {
  int64_t documents = 0, kept = 0, normalized = 0, skipped = 0;
  std::map<std::string, int64_t> removed;    // by rule
  std::map<std::string, int64_t> c4_lines;   // lines the C4 rules dropped, by rule, and kept
  std::map<std::string, int64_t> languages;  // CLD2's top language of every document
  double seconds = 0;
};

CleanStats run_clean(const CleanOptions& o);

// NFC, and control characters but tab and newline removed.
std::string normalize_text(const std::string& utf8);
// CLD2's most likely language code of a text and its share (0 to 1).
std::pair<std::string, double> detect_language(const std::string& utf8);

}  // namespace mtnlg::curate
