#include "data/curate/c4_rules.h"

#include <unicode/uchar.h>

#include <array>
#include <string_view>
#include <vector>

#include "data/curate/nltk_tokenize.h"
#include "data/python_text.h"

namespace mtnlg::curate {
namespace {

// str.splitlines() of a text whose control characters are gone but tab and newline (clean's
// normalization): \n, \r\n and \r, and the separators U+2028 and U+2029, and U+0085, U+000B,
// U+000C and U+001C-U+001E for a text that still has them. No empty line at the end.
std::vector<std::u32string> python_splitlines(const std::u32string& t) {
  std::vector<std::u32string> out;
  size_t start = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const char32_t c = t[i];
    const bool brk = c == U'\n' || c == U'\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
                     c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    out.push_back(t.substr(start, i - start));
    if (c == U'\r' && i + 1 < t.size() && t[i + 1] == U'\n') ++i;
    start = i + 1;
  }
  if (start < t.size()) out.push_back(t.substr(start));
  return out;
}

std::u32string strip(const std::u32string& s) {
  size_t b = 0, e = s.size();
  while (b < e && python_isspace(s[b])) ++b;
  while (e > b && python_isspace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::vector<std::u32string_view> split_words(const std::u32string& s) {
  std::vector<std::u32string_view> words;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && python_isspace(s[i])) ++i;
    const size_t b = i;
    while (i < s.size() && !python_isspace(s[i])) ++i;
    if (i > b) words.emplace_back(s.data() + b, i - b);
  }
  return words;
}

bool is_decimal_digit(char32_t c) {
  return u_charType(static_cast<UChar32>(c)) == U_DECIMAL_DIGIT_NUMBER;
}

// re.sub(r"\[\d*]|\[edit]|\[citation needed]", "", line): leftmost matches, left to right.
std::u32string remove_citations(const std::u32string& s) {
  static const std::u32string kEdit = U"[edit]", kNeeded = U"[citation needed]";
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == U'[') {
      size_t j = i + 1;
      while (j < s.size() && is_decimal_digit(s[j])) ++j;
      if (j < s.size() && s[j] == U']') {
        i = j + 1;
        continue;
      }
      if (s.compare(i, kEdit.size(), kEdit) == 0) {
        i += kEdit.size();
        continue;
      }
      if (s.compare(i, kNeeded.size(), kNeeded) == 0) {
        i += kNeeded.size();
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

bool contains(const std::u32string& s, std::u32string_view x) {
  return s.find(x) != std::u32string::npos;
}

bool ends_with(const std::u32string& s, std::u32string_view x) {
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

bool is_closing(char32_t c) {
  return c == U'"' || c == U'\'' || c == U')' || c == U']' || c == 0x201D || c == 0x2019;
}
bool is_opening(char32_t c) {
  return c == U'"' || c == U'\'' || c == U'(' || c == U'[' || c == 0x201C || c == 0x2018;
}

}  // namespace

bool C4Rules::any() const {
  return max_word_length >= 0 || remove_citations || terminal_punct || min_words_per_line >= 0 ||
         lorem_ipsum || javascript || curly_bracket || policy || min_sentences >= 0;
}

void apply_c4_defaults(C4Rules* c) {
  if (c->max_word_length < 0) c->max_word_length = 1000;
  if (c->min_words_per_line < 0) c->min_words_per_line = 3;
  if (c->min_sentences < 0) c->min_sentences = 5;
  c->remove_citations = c->terminal_punct = c->lorem_ipsum = c->javascript = c->curly_bracket =
      c->policy = true;
}

int64_t count_sentences(const std::u32string& line) {
  int64_t n = 0;
  bool any_text = false;
  size_t i = 0;
  while (i < line.size()) {
    const char32_t c = line[i];
    if (c != U'.' && c != U'!' && c != U'?') {
      any_text = any_text || !python_isspace(c);
      ++i;
      continue;
    }
    any_text = true;
    size_t j = i;
    while (j < line.size() && (line[j] == U'.' || line[j] == U'!' || line[j] == U'?')) ++j;
    while (j < line.size() && is_closing(line[j])) ++j;
    size_t k = j;
    while (k < line.size() && python_isspace(line[k])) ++k;
    if (k > j && k < line.size() &&
        (u_isUUppercase(static_cast<UChar32>(line[k])) || is_decimal_digit(line[k]) ||
         is_opening(line[k]))) {
      ++n;
      any_text = false;
    }
    i = j;
  }
  return n + (any_text ? 1 : 0);
}

C4Result apply_c4(const std::string& utf8, const C4Rules& c, const PunktModel* punkt) {
  static constexpr std::array<std::u32string_view, 6> kPolicy = {
      U"terms of use", U"privacy policy", U"cookie policy",
      U"uses cookies", U"use of cookies", U"use cookies"};
  C4Result r;
  std::u32string kept;
  int64_t sentences = 0;
  bool first = true;
  for (const std::u32string& raw : python_splitlines(utf8_to_u32(utf8))) {
    std::u32string line = strip(raw);
    // Words of the line as it was (the views die with the cut below; only their count stays).
    const auto words = split_words(line);
    const auto nwords = static_cast<int64_t>(words.size());
    bool long_word = false;
    for (const auto& w : words)
      long_word = long_word ||
                  (c.max_word_length >= 0 && static_cast<int64_t>(w.size()) > c.max_word_length);
    if (long_word) {
      ++r.lines["c4_too_long_word"];
      continue;
    }
    if (c.remove_citations) line = remove_citations(line);
    if (c.terminal_punct) {
      const bool punct =
          !line.empty() && (line.back() == U'.' || line.back() == U'?' || line.back() == U'!' ||
                            line.back() == U'"' || line.back() == U'\'');
      if (!punct || ends_with(line, U"...")) {
        ++r.lines["c4_no_terminal_punct"];
        continue;
      }
    }
    if (nwords < c.min_words_per_line) {
      ++r.lines["c4_too_few_words"];
      continue;
    }
    const std::u32string lower = python_lower(line);
    if (c.lorem_ipsum && contains(lower, U"lorem ipsum")) {
      r.removed_by = "c4_lorem_ipsum";
      return r;
    }
    if (c.javascript && contains(lower, U"javascript")) {
      ++r.lines["c4_javascript"];
      continue;
    }
    if (c.curly_bracket && contains(line, U"{")) {
      r.removed_by = "c4_curly_bracket";
      return r;
    }
    bool policy = false;
    for (const auto p : kPolicy) policy = policy || (c.policy && contains(lower, p));
    if (policy) {
      ++r.lines["c4_policy"];
      continue;
    }
    // DataTrove's split_into_sentences: Punkt's spans, one piece at least.
    sentences +=
        punkt != nullptr
            ? std::max<int64_t>(1, static_cast<int64_t>(punkt_sentence_spans(line, *punkt).size()))
            : count_sentences(line);
    if (!first) kept.push_back(U'\n');
    kept += line;
    first = false;
    ++r.lines["c4_lines_kept"];
  }
  if (c.min_sentences >= 0 && sentences < c.min_sentences) {
    r.removed_by = "c4_too_few_sentences";
    return r;
  }
  r.text = u32_to_utf8(strip(kept));
  return r;
}

}  // namespace mtnlg::curate
