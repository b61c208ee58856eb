#include "data/curate/clean_stage.h"

#include <cld2/public/compact_lang_det.h>
#include <omp.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/metrics.h"
#include "core/status.h"
#include "data/curate/nltk_tokenize.h"
#include "data/curate/shard_writer.h"
#include "data/curate/staged_file.h"
#include "data/gpt2_tokenizer.h"
#include "data/python_text.h"

namespace CLD2 {
// lang_script.h (an internal header of libcld2-dev, which its public one does not include).
const char* LanguageCode(Language lang);
}  // namespace CLD2

namespace mtnlg::curate {

std::string normalize_text(const std::string& utf8) {
  bool ascii = true;
  for (const char c : utf8) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  std::u32string t;
  if (ascii) {
    t = utf8_to_u32(utf8);
  } else {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
    const icu::UnicodeString n =
        nfc->normalize(icu::UnicodeString::fromUTF8(
                           icu::StringPiece(utf8.data(), static_cast<int32_t>(utf8.size()))),
                       status);
    if (U_FAILURE(status)) throw io_error(std::string("ICU NFC: ") + u_errorName(status));
    t.assign(static_cast<size_t>(n.countChar32()), U'\0');
    n.toUTF32(reinterpret_cast<UChar32*>(t.data()), static_cast<int32_t>(t.size()), status);
  }
  std::u32string out;
  out.reserve(t.size());
  for (const char32_t c : t)
    if (c == U'\t' || c == U'\n' || u_charType(static_cast<UChar32>(c)) != U_CONTROL_CHAR)
      out.push_back(c);
  return u32_to_utf8(out);
}

std::pair<std::string, double> detect_language(const std::string& utf8) {
  CLD2::Language top3[3];
  int percent3[3];
  int text_bytes = 0;
  bool reliable = false;
  const CLD2::Language lang = CLD2::ExtDetectLanguageSummary(
      utf8.data(), static_cast<int>(utf8.size()), true, top3, percent3, &text_bytes, &reliable);
  return {CLD2::LanguageCode(lang), top3[0] == lang ? percent3[0] / 100.0 : 0.0};
}

bool GopherRules::any() const {
  return min_words >= 0 || max_words >= 0 || min_mean_word_length >= 0 ||
         max_mean_word_length >= 0 || max_symbol_word_ratio >= 0 || max_bullet_lines_ratio >= 0 ||
         max_ellipsis_lines_ratio >= 0 || min_alpha_words_ratio >= 0 || min_stop_words >= 0 ||
         max_dup_para_frac >= 0 || max_dup_para_char_frac >= 0 || max_dup_line_frac >= 0 ||
         max_dup_line_char_frac >= 0 || !max_top_ngram_char_frac.empty() ||
         !max_dup_ngram_char_frac.empty();
}

void apply_gopher_defaults(GopherRules* g) {
  const auto set = [](auto& v, auto x) {
    if (v < 0) v = x;
  };
  set(g->min_words, int64_t{50});
  set(g->max_words, int64_t{100000});
  set(g->min_mean_word_length, 3.0);
  set(g->max_mean_word_length, 10.0);
  set(g->max_symbol_word_ratio, 0.1);
  set(g->max_bullet_lines_ratio, 0.9);
  set(g->max_ellipsis_lines_ratio, 0.3);
  set(g->min_alpha_words_ratio, 0.8);
  set(g->min_stop_words, int64_t{2});
  set(g->max_dup_para_frac, 0.3);
  set(g->max_dup_para_char_frac, 0.2);
  set(g->max_dup_line_frac, 0.3);
  set(g->max_dup_line_char_frac, 0.2);
  if (g->max_top_ngram_char_frac.empty())
    g->max_top_ngram_char_frac = {{2, 0.2}, {3, 0.18}, {4, 0.16}};
  if (g->max_dup_ngram_char_frac.empty())
    g->max_dup_ngram_char_frac = {{5, 0.15}, {6, 0.14}, {7, 0.13},
                                  {8, 0.12}, {9, 0.11}, {10, 0.10}};
}

namespace {

int64_t count_of(const std::u32string& t, const std::u32string& what) {
  int64_t n = 0;
  for (size_t at = t.find(what); at != std::u32string::npos; at = t.find(what, at + what.size()))
    ++n;
  return n;
}

// (elements seen before, their characters): DataTrove's find_duplicates.
std::pair<int64_t, int64_t> duplicates(const std::vector<std::u32string>& xs) {
  std::unordered_set<std::u32string_view> seen;
  int64_t elements = 0, chars = 0;
  for (const auto& x : xs)
    if (!seen.insert(x).second) {
      ++elements;
      chars += static_cast<int64_t>(x.size());
    }
  return {elements, chars};
}

// Splits at runs of `min_run` or more newlines.
std::vector<std::u32string> split_newlines(const std::u32string& t, size_t min_run) {
  std::vector<std::u32string> out;
  size_t start = 0, i = 0;
  while (i < t.size()) {
    if (t[i] != U'\n') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < t.size() && t[j] == U'\n') ++j;
    if (j - i >= min_run) {
      out.push_back(t.substr(start, i - start));
      start = j;
    }
    i = j;
  }
  out.push_back(t.substr(start));
  return out;
}

std::u32string strip_ws(const std::u32string& s, bool left, bool right) {
  size_t b = 0, e = s.size();
  while (left && b < e && python_isspace(s[b])) ++b;
  while (right && e > b && python_isspace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

bool ends_with(const std::u32string& s, const std::u32string& x) {
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

// DataTrove's PUNCTUATION_SET (datatrove/utils/text.py at a649de7: PUNCTUATION, with the C0
// controls but tab and newline, DEL and the C1 controls, and TERMINAL_PUNCTUATION), as sorted
// code point ranges. A word of these characters alone is a symbol, not a word.
constexpr std::pair<char32_t, char32_t> kDatatrovePunctuation[] = {
    {0x0, 0x8},         {0xB, 0x1F},        {0x21, 0x2F},       {0x3A, 0x40},
    {0x5B, 0x60},       {0x7B, 0x9F},       {0xAB, 0xAB},       {0xB4, 0xB4},
    {0xBB, 0xBB},       {0x589, 0x589},     {0x61D, 0x61F},     {0x6D4, 0x6D4},
    {0x700, 0x702},     {0x7F9, 0x7F9},     {0x837, 0x837},     {0x839, 0x839},
    {0x83D, 0x83E},     {0x964, 0x965},     {0x104A, 0x104B},   {0x1362, 0x1362},
    {0x1367, 0x1368},   {0x166E, 0x166E},   {0x1735, 0x1736},   {0x17D4, 0x17D6},
    {0x17D9, 0x17DA},   {0x1803, 0x1803},   {0x1809, 0x1809},   {0x1944, 0x1945},
    {0x1AA8, 0x1AAB},   {0x1B5A, 0x1B5B},   {0x1B5E, 0x1B5F},   {0x1B7D, 0x1B7E},
    {0x1C3B, 0x1C3C},   {0x1C7E, 0x1C7F},   {0x2013, 0x2014},   {0x2019, 0x2019},
    {0x201C, 0x201E},   {0x2026, 0x2026},   {0x203C, 0x203D},   {0x2047, 0x2049},
    {0x2236, 0x2236},   {0x2501, 0x2501},   {0x25BA, 0x25BA},   {0x2E2E, 0x2E2E},
    {0x2E3C, 0x2E3C},   {0x2E53, 0x2E54},   {0x3001, 0x3002},   {0x3008, 0x300D},
    {0x3010, 0x3011},   {0xA4FF, 0xA4FF},   {0xA60E, 0xA60F},   {0xA6F3, 0xA6F3},
    {0xA6F7, 0xA6F7},   {0xA876, 0xA877},   {0xA8CE, 0xA8CF},   {0xA92F, 0xA92F},
    {0xA9C8, 0xA9C9},   {0xAA5D, 0xAA5F},   {0xAAF0, 0xAAF1},   {0xABEB, 0xABEB},
    {0xFE52, 0xFE52},   {0xFE56, 0xFE57},   {0xFF01, 0xFF01},   {0xFF05, 0xFF05},
    {0xFF08, 0xFF09},   {0xFF0C, 0xFF0C},   {0xFF0E, 0xFF0E},   {0xFF11, 0xFF11},
    {0xFF1A, 0xFF1B},   {0xFF1F, 0xFF1F},   {0xFF5E, 0xFF5E},   {0xFF61, 0xFF61},
    {0x10A56, 0x10A57}, {0x10F55, 0x10F59}, {0x10F86, 0x10F89}, {0x11047, 0x11048},
    {0x110BE, 0x110C1}, {0x11141, 0x11143}, {0x111C5, 0x111C6}, {0x111CD, 0x111CD},
    {0x111DE, 0x111DF}, {0x11238, 0x11239}, {0x1123B, 0x1123C}, {0x112A9, 0x112A9},
    {0x1144B, 0x1144C}, {0x115C2, 0x115C3}, {0x115C9, 0x115D7}, {0x11641, 0x11642},
    {0x1173C, 0x1173E}, {0x11944, 0x11944}, {0x11946, 0x11946}, {0x11A42, 0x11A43},
    {0x11A9B, 0x11A9C}, {0x11C41, 0x11C42}, {0x11EF7, 0x11EF8}, {0x11F43, 0x11F44},
    {0x16A6E, 0x16A6F}, {0x16AF5, 0x16AF5}, {0x16B37, 0x16B38}, {0x16B44, 0x16B44},
    {0x16E98, 0x16E98}, {0x1BC9F, 0x1BC9F}, {0x1DA88, 0x1DA88}};

bool datatrove_punctuation(char32_t c) {
  const auto* end = std::end(kDatatrovePunctuation);
  const auto* it = std::upper_bound(std::begin(kDatatrovePunctuation), end, c,
                                    [](char32_t x, const auto& r) { return x < r.first; });
  return it != std::begin(kDatatrovePunctuation) && c <= std::prev(it)->second;
}

}  // namespace

std::string gopher_verdict(const std::string& utf8, const GopherRules& g, const PunktModel* punkt) {
  const std::u32string text = utf8_to_u32(utf8);
  std::vector<std::u32string> tokens;      // NLTK's words, when they are asked for
  std::vector<std::u32string_view> words;  // views into text or tokens
  if (punkt != nullptr) {
    tokens = nltk_word_tokenize(text, *punkt);
    for (const std::u32string& t : tokens) words.push_back(t);
  } else {
    for (size_t i = 0; i < text.size();) {
      while (i < text.size() && python_isspace(text[i])) ++i;
      size_t j = i;
      while (j < text.size() && !python_isspace(text[j])) ++j;
      if (j > i) words.push_back(std::u32string_view(text).substr(i, j - i));
      i = j;
    }
  }
  const auto n = static_cast<double>(words.size());
  // Word counts and lengths are of the words that are not symbols alone (DataTrove's
  // non_symbol_words); the ratios below divide by all words, as DataTrove's do.
  int64_t counted = 0;
  double counted_chars = 0;
  for (const auto& w : words) {
    if (std::all_of(w.begin(), w.end(), datatrove_punctuation)) continue;
    ++counted;
    counted_chars += static_cast<double>(w.size());
  }
  if (g.min_words >= 0 && counted < g.min_words) return "gopher_short_doc";
  if (g.max_words >= 0 && counted > g.max_words) return "gopher_long_doc";
  // With no word the mean is NumPy's NaN, which no bound removes.
  if (counted > 0 && (g.min_mean_word_length >= 0 || g.max_mean_word_length >= 0)) {
    const double mean = counted_chars / static_cast<double>(counted);
    if (g.min_mean_word_length >= 0 && mean < g.min_mean_word_length)
      return "gopher_below_avg_threshold";
    if (g.max_mean_word_length >= 0 && mean > g.max_mean_word_length)
      return "gopher_above_avg_threshold";
  }
  if (g.max_symbol_word_ratio >= 0) {
    const double w = std::max(n, 1.0);
    if (static_cast<double>(count_of(text, U"#")) / w > g.max_symbol_word_ratio)
      return "gopher_too_many_hashes";
    if (static_cast<double>(count_of(text, U"...") + count_of(text, U"\u2026")) / w >
        g.max_symbol_word_ratio)
      return "gopher_too_many_ellipsis";
  }
  if (g.max_bullet_lines_ratio >= 0 || g.max_ellipsis_lines_ratio >= 0) {
    // str.splitlines(): \n, \r, \r\n and the other line boundaries Python knows.
    std::vector<std::u32string> lines;
    std::u32string cur;
    for (size_t i = 0; i < text.size(); ++i) {
      const char32_t c = text[i];
      const bool boundary = c == U'\n' || c == U'\r' || c == 0x0b || c == 0x0c || c == 0x1c ||
                            c == 0x1d || c == 0x1e || c == 0x85 || c == 0x2028 || c == 0x2029;
      if (!boundary) {
        cur.push_back(c);
        continue;
      }
      if (c == U'\r' && i + 1 < text.size() && text[i + 1] == U'\n') ++i;
      lines.push_back(std::move(cur));
      cur.clear();
    }
    if (!cur.empty()) lines.push_back(std::move(cur));
    const double nl = std::max<double>(static_cast<double>(lines.size()), 1.0);
    int64_t bullets = 0, ellipses = 0;
    for (const auto& l : lines) {
      const std::u32string left = strip_ws(l, true, false), right = strip_ws(l, false, true);
      bullets += !left.empty() && (left[0] == 0x2022 || left[0] == U'-');
      ellipses += ends_with(right, U"...") || ends_with(right, U"\u2026");
    }
    if (g.max_bullet_lines_ratio >= 0 &&
        static_cast<double>(bullets) / nl > g.max_bullet_lines_ratio)
      return "gopher_too_many_bullets";
    if (g.max_ellipsis_lines_ratio >= 0 &&
        static_cast<double>(ellipses) / nl > g.max_ellipsis_lines_ratio)
      return "gopher_too_many_end_ellipsis";
  }
  if (g.min_alpha_words_ratio >= 0) {
    int64_t alpha = 0;
    for (const auto& w : words)
      alpha += std::any_of(w.begin(), w.end(),
                           [](char32_t c) { return u_isalpha(static_cast<UChar32>(c)); });
    if (static_cast<double>(alpha) / std::max(n, 1.0) < g.min_alpha_words_ratio)
      return "gopher_below_alpha_threshold";
  }
  if (g.min_stop_words >= 0) {
    static const std::set<std::u32string_view> stop = {U"the", U"be",   U"to",   U"of",
                                                       U"and", U"that", U"have", U"with"};
    std::set<std::u32string_view> present;  // distinct stop words (DataTrove intersects sets)
    for (const auto& w : words)
      if (stop.count(w)) present.insert(w);
    if (static_cast<int64_t>(present.size()) < g.min_stop_words) return "gopher_enough_stop_words";
  }
  const auto chars = static_cast<double>(std::max<size_t>(text.size(), 1));
  if (g.max_dup_para_frac >= 0 || g.max_dup_para_char_frac >= 0) {
    const auto paras = split_newlines(strip_ws(text, true, true), 2);
    const auto [elements, dup_chars] = duplicates(paras);
    if (g.max_dup_para_frac >= 0 &&
        static_cast<double>(elements) / static_cast<double>(paras.size()) > g.max_dup_para_frac)
      return "dup_para_frac";
    if (g.max_dup_para_char_frac >= 0 &&
        static_cast<double>(dup_chars) / chars > g.max_dup_para_char_frac)
      return "dup_para_char_frac";
  }
  if (g.max_dup_line_frac >= 0 || g.max_dup_line_char_frac >= 0) {
    const auto lines = split_newlines(text, 1);
    const auto [elements, dup_chars] = duplicates(lines);
    if (g.max_dup_line_frac >= 0 &&
        static_cast<double>(elements) / static_cast<double>(lines.size()) > g.max_dup_line_frac)
      return "dup_line_frac";
    if (g.max_dup_line_char_frac >= 0 &&
        static_cast<double>(dup_chars) / chars > g.max_dup_line_char_frac)
      return "dup_line_char_frac";
  }
  // The n-grams as positions in `words`, hashed and compared in place (no string per n-gram).
  const auto seq_hash = [&](size_t i, int k, bool spaces) {
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (int j = 0; j < k; ++j) {
      if (spaces && j > 0) h = (h ^ U' ') * 0xBF58476D1CE4E5B9ull;
      for (const char32_t c : words[i + static_cast<size_t>(j)])
        h = (h ^ c) * 0xBF58476D1CE4E5B9ull;
    }
    return h ^ (h >> 31);
  };
  for (const auto& [k, frac] : g.max_top_ngram_char_frac) {
    // The most frequent n-gram (" "-joined: the same words in order; the first such on ties)
    // times its count.
    const auto n_grams =
        words.size() >= static_cast<size_t>(k) ? words.size() - static_cast<size_t>(k) + 1 : 0;
    if (n_grams == 0) continue;
    std::vector<uint64_t> hs(n_grams);
    for (size_t i = 0; i < n_grams; ++i) hs[i] = seq_hash(i, k, true);
    const auto hash = [&](size_t i) { return hs[i]; };
    const auto same = [&](size_t a, size_t b) {
      if (hs[a] != hs[b]) return false;
      for (int j = 0; j < k; ++j)
        if (words[a + static_cast<size_t>(j)] != words[b + static_cast<size_t>(j)]) return false;
      return true;
    };
    std::unordered_map<size_t, int64_t, decltype(hash), decltype(same)> counts(n_grams, hash, same);
    size_t top = 0;
    for (size_t i = 0; i < n_grams; ++i) {
      const auto it = counts.try_emplace(i, 0).first;
      ++it->second;
      const int64_t top_count = counts.find(top)->second;
      if (it->second > top_count || (it->second == top_count && it->first < top)) top = it->first;
    }
    int64_t length = k - 1;
    for (int j = 0; j < k; ++j)
      length += static_cast<int64_t>(words[top + static_cast<size_t>(j)].size());
    if (static_cast<double>(length) * static_cast<double>(counts.find(top)->second) / chars > frac)
      return "top_" + std::to_string(k) + "_gram";
  }
  for (const auto& [k, frac] : g.max_dup_ngram_char_frac) {
    // DataTrove's find_all_duplicate: n-grams joined without spaces (equal when their characters
    // are, whatever the word boundaries); a repeat jumps over itself.
    const auto chars_of = [&](size_t i) {
      int64_t n = 0;
      for (int j = 0; j < k; ++j)
        n += static_cast<int64_t>(words[i + static_cast<size_t>(j)].size());
      return n;
    };
    const size_t n_grams =
        words.size() >= static_cast<size_t>(k) ? words.size() - static_cast<size_t>(k) + 1 : 0;
    std::vector<uint64_t> hs(n_grams);
    for (size_t i = 0; i < n_grams; ++i) hs[i] = seq_hash(i, k, false);
    const auto hash = [&](size_t i) { return hs[i]; };
    const auto same = [&](size_t a, size_t b) {
      if (hs[a] != hs[b] || chars_of(a) != chars_of(b)) return false;
      size_t wa = a, wb = b, ca = 0, cb = 0;  // word and character positions on each side
      for (int64_t left = chars_of(a); left > 0; --left) {
        while (ca == words[wa].size()) ++wa, ca = 0;
        while (cb == words[wb].size()) ++wb, cb = 0;
        if (words[wa][ca++] != words[wb][cb++]) return false;
      }
      return true;
    };
    std::unordered_set<size_t, decltype(hash), decltype(same)> seen(16, hash, same);
    int64_t repeated = 0;
    for (size_t i = 0; i + static_cast<size_t>(k) <= words.size();) {
      if (seen.count(i)) {
        repeated += chars_of(i);
        i += static_cast<size_t>(k);
      } else {
        seen.insert(i);
        ++i;
      }
    }
    if (static_cast<double>(repeated) / chars > frac)
      return "duplicated_" + std::to_string(k) + "_n_grams";
  }
  return "";
}

CleanStats run_clean(const CleanOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<const Gpt2Tokenizer> tokenizer;
  if (o.min_gpt2_tokens > 0) tokenizer = Gpt2Tokenizer::load(o.vocab_file, o.merge_file);
  std::optional<PunktModel> punkt;
  if (!o.punkt_dir.empty()) punkt = read_punkt_model(o.punkt_dir);
  TextRecords records(o.input, o.text_key, o.bad_records);
  ShardWriter out(o.output);
  PreprocessProgress progress(o.progress, records.file_size(), 100000);
  const int threads = o.threads > 0 ? o.threads : omp_get_num_procs();
  CleanStats stats;
  std::vector<TextRecord> batch;
  struct Result {
    std::string text, removed_by, language;
    std::map<std::string, int64_t> c4_lines;
    bool normalized = false;  // NFC or the control characters changed the text
  };
  std::vector<Result> results;
  while (records.next_batch(&batch, size_t{16} << 20)) {
    const auto n = static_cast<int64_t>(batch.size());
    results.assign(batch.size(), {});
#pragma omp parallel for num_threads(threads) schedule(dynamic, 16)
    for (int64_t i = 0; i < n; ++i) {
      Result& r = results[static_cast<size_t>(i)];
      r.text = normalize_text(batch[static_cast<size_t>(i)].text);
      r.normalized = r.text != batch[static_cast<size_t>(i)].text;
      const auto chars = static_cast<int64_t>(utf8_to_u32(r.text).size());
      if (o.min_chars > 0 && chars < o.min_chars) {
        r.removed_by = "min_chars";
      } else if (o.short_javascript > 0 && chars < o.short_javascript &&
                 u32_to_utf8(python_lower(utf8_to_u32(r.text))).find("javascript") !=
                     std::string::npos) {
        r.removed_by = "short_javascript";
      } else if (o.min_gpt2_tokens > 0 && chars < 8 * o.min_gpt2_tokens &&
                 static_cast<int64_t>(tokenizer->encode(r.text).size()) < o.min_gpt2_tokens) {
        r.removed_by = "min_gpt2_tokens";
      }
      if (r.removed_by.empty() && o.gopher.any())
        r.removed_by = gopher_verdict(r.text, o.gopher, punkt ? &*punkt : nullptr);
      if (r.removed_by.empty() && o.c4.any()) {
        C4Result c4 = apply_c4(r.text, o.c4, punkt ? &*punkt : nullptr);
        r.removed_by = std::move(c4.removed_by);
        r.c4_lines = std::move(c4.lines);
        if (r.removed_by.empty()) r.text = std::move(c4.text);
      }
      if (!o.languages.empty()) {
        const auto [code, share] = detect_language(r.text);
        r.language = code;
        if (r.removed_by.empty()) {
          bool wanted = false;
          for (const std::string& l : o.languages) wanted = wanted || l == code;
          if (!wanted || share < o.min_language_score) r.removed_by = "language";
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      const TextRecord& rec = batch[static_cast<size_t>(i)];
      Result& r = results[static_cast<size_t>(i)];
      ++stats.documents;
      if (!r.language.empty()) ++stats.languages[r.language];
      for (const auto& [rule, k] : r.c4_lines) stats.c4_lines[rule] += k;
      const bool changed = r.text != rec.text;
      stats.normalized += r.normalized;
      if (!r.removed_by.empty()) {
        ++stats.removed[r.removed_by];
        continue;
      }
      ++stats.kept;
      out.write_line(changed ? rewrite_record(rec.raw, {{o.text_key, json_string(r.text)}})
                             : rec.raw);
    }
    progress.update(records.bytes_read(), stats.documents, -1);
  }
  progress.finish();
  out.commit();
  for (const auto& [why, k] : records.skipped()) stats.skipped += k;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!o.report.empty()) {
    const std::string line = JsonLine()
                                 .add("input", o.input)
                                 .add("documents", stats.documents)
                                 .add("kept", stats.kept)
                                 .add("normalized", stats.normalized)
                                 .add_raw("removed", json_counts(stats.removed))
                                 .add_raw("c4_lines", json_counts(stats.c4_lines))
                                 .add_raw("languages", json_counts(stats.languages))
                                 .add("bad_records_skipped", stats.skipped)
                                 .str() +
                             "\n";
    write_whole_file(o.report, line);
  }
  return stats;
}

}  // namespace mtnlg::curate
