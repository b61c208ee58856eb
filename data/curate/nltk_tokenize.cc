#include "data/curate/nltk_tokenize.h"

#include <unicode/regex.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <array>
#include <fstream>
#include <memory>
#include <optional>
#include <string_view>

#include "core/status.h"
#include "data/python_text.h"
#include "data/unicode_classes.h"

namespace mtnlg::curate {
namespace {

using icu::RegexMatcher;
using icu::RegexPattern;
using icu::UnicodeString;

// Python's classes spelled out for ICU (see the header): {W} \w, {B} \b, {S} \s, {NS} \S, {END}
// $ without MULTILINE.
constexpr std::string_view kSpaces =
    "\\t\\n\\u000B\\f\\r\\u001C-\\u001F \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029"
    "\\u202F\\u205F\\u3000";

std::string expand(std::string_view pattern) {
  const std::string w = "[\\p{L}\\p{N}_]";
  const std::pair<std::string, std::string> subs[] = {
      {"{B}", "(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))"},
      {"{W}", w},
      {"{S}", "[" + std::string(kSpaces) + "]"},
      {"{NS}", "[^" + std::string(kSpaces) + "]"},
      {"{END}", "(?=\\n?\\z)"}};
  std::string p(pattern);
  for (const auto& [key, value] : subs)
    for (size_t at = p.find(key); at != std::string::npos; at = p.find(key, at + value.size()))
      p.replace(at, key.size(), value);
  return p;
}

std::unique_ptr<RegexPattern> compile(std::string_view pattern) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError where;
  std::unique_ptr<RegexPattern> re(
      RegexPattern::compile(UnicodeString::fromUTF8(expand(pattern)), 0, where, status));
  MTNLG_CHECK_MSG(U_SUCCESS(status), "ICU does not compile the pattern "
                                         << pattern << " (" << u_errorName(status) << " at offset "
                                         << where.offset << ")");
  return re;
}

// Python's IGNORECASE for the letters the case-insensitive rules spell ({ci:word}): each letter
// and its other case, 'i' also 'İ' and 'ı', 's' also 'ſ' (re's case-insensitive classes,
// checked over all of Unicode with Python 3.11; ICU's (?i) folds these differently).
std::string case_insensitive(std::string_view word) {
  std::string out;
  for (const char c : word) {
    if (c == 'i') {
      out += "[iI\u0130\u0131]";
    } else if (c == 's') {
      out += "[sS\u017f]";
    } else if (c >= 'a' && c <= 'z') {
      out += std::string("[") + c + static_cast<char>(c - 'a' + 'A') + "]";
    } else {
      out += c;
    }
  }
  return out;
}

std::string expand_case(std::string p) {
  for (size_t at = p.find("{ci:"); at != std::string::npos; at = p.find("{ci:", at)) {
    const size_t end = p.find('}', at);
    const std::string classes = case_insensitive(std::string_view(p).substr(at + 4, end - at - 4));
    p.replace(at, end + 1 - at, classes);
    at += classes.size();
  }
  return p;
}

// One of NLTKWordTokenizer's substitutions, and the characters its pattern cannot match
// without (it is skipped on a text holding none of them: most passes find nothing to do).
struct Substitution {
  std::unique_ptr<RegexPattern> re;
  UnicodeString with;
  std::array<bool, 128> needs_ascii{};
  std::u16string needs_other;  // the non-ASCII ones
  bool present_in(const UnicodeString& text) const {
    const char16_t* buf = text.getBuffer();
    for (int32_t i = 0, n = text.length(); i < n; ++i) {
      const char16_t c = buf[i];
      if (c < 128 ? needs_ascii[c] : needs_other.find(c) != std::u16string::npos) return true;
    }
    return false;
  }
};

struct Rule {
  std::string_view pattern, with;
  std::u16string_view needs;
};

std::vector<Substitution> substitutions(std::initializer_list<Rule> rules) {
  std::vector<Substitution> out;
  for (const Rule& r : rules) {
    Substitution sub{compile(expand_case(std::string(r.pattern))),
                     UnicodeString::fromUTF8(std::string(r.with)),
                     {},
                     {}};
    for (const char16_t c : r.needs) {
      if (c < 128) {
        sub.needs_ascii[c] = true;
      } else {
        sub.needs_other += c;
      }
    }
    out.push_back(std::move(sub));
  }
  return out;
}

// NLTKWordTokenizer's substitutions (nltk/tokenize/destructive.py), in its order; `$n` and `$0`
// are Python's \n and \g<0>.
struct Treebank {
  std::vector<Substitution> before_padding = substitutions({
      // STARTING_QUOTES
      {R"re(([«“‘„]|[`]+))re", " $1 ", u"«“‘„`"},
      {R"re(^")re", "``", u"\""},
      {R"re((``))re", " $1 ", u"`"},
      {R"re(([ \(\[\{<])("|''))re", "$1 `` ", u"\"'"},
      {R"re((')(?!{ci:re}|{ci:ve}|{ci:ll}|{ci:m}|{ci:t}|{ci:s}|{ci:d}|{ci:n})({W}){B})re", "$1 $2",
       u"'"},
      // PUNCTUATION
      {R"re(([^.])(\.)([\]\)\}>"'»”’ ]*){S}*{END})re", "$1 $2 $3 ", u"."},
      {R"re(([:,])([^\p{Nd}]))re", " $1 $2", u":,"},
      {R"re(([:,]){END})re", " $1 ", u":,"},
      {R"re(\.{2,})re", " $0 ", u"."},
      {R"re([;@#\$%\&])re", " $0 ", u";@#$%&"},
      {R"re(([^.])(\.)([\]\)\}>"']*){S}*{END})re", "$1 $2$3 ", u"."},
      {R"re([?!])re", " $0 ", u"?!"},
      {R"re(([^'])' )re", "$1 ' ", u"'"},
      {R"re(\*)re", " $0 ", u"*"},
      // PARENS_BRACKETS, DOUBLE_DASHES
      {R"re([\]\[\(\)\{\}<>])re", " $0 ", u"[](){}<>"},
      {R"re(--)re", " -- ", u"-"},
  });
  std::vector<Substitution> after_padding = substitutions({
      // ENDING_QUOTES
      {R"re(([»”’]))re", " $1 ", u"»”’"},
      {R"re('')re", " '' ", u"'"},
      {R"re(")re", " '' ", u"\""},
      {R"re(([^' ])('[sS]|'[mM]|'[dD]|') )re", "$1 $2 ", u"'"},
      {R"re(([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) )re", "$1 $2 ", u"'"},
      // CONTRACTIONS2 and CONTRACTIONS3 (MacIntyre's, case-insensitive; CONTRACTIONS4 is unused
      // in NLTK too)
      {R"re({B}({ci:can})({ci:not}){B})re", " $1 $2 ", u"cC"},
      {R"re({B}({ci:d})('{ci:ye}){B})re", " $1 $2 ", u"'"},
      {R"re({B}({ci:gim})({ci:me}){B})re", " $1 $2 ", u"gG"},
      {R"re({B}({ci:gon})({ci:na}){B})re", " $1 $2 ", u"gG"},
      {R"re({B}({ci:got})({ci:ta}){B})re", " $1 $2 ", u"gG"},
      {R"re({B}({ci:lem})({ci:me}){B})re", " $1 $2 ", u"lL"},
      {R"re({B}({ci:more})('{ci:n}){B})re", " $1 $2 ", u"'"},
      {R"re({B}({ci:wan})({ci:na})(?={S}))re", " $1 $2 ", u"wW"},
      {R"re( ('{ci:t})({ci:is}){B})re", " $1 $2 ", u"'"},
      {R"re( ('{ci:t})({ci:was}){B})re", " $1 $2 ", u"'"},
  });
};

// Applies the substitutions in order, each only where its characters occur.
void substitute_all(const std::vector<Substitution>& subs, UnicodeString& text) {
  // A matcher per pattern and thread, reset onto each text (making one costs more than a pass).
  thread_local std::map<const RegexPattern*, std::unique_ptr<RegexMatcher>> matchers;
  for (const Substitution& s : subs) {
    if (!s.present_in(text)) continue;
    UErrorCode status = U_ZERO_ERROR;
    auto& m = matchers[s.re.get()];
    if (!m) m.reset(s.re->matcher(status));
    m->reset(text);
    UnicodeString out = m->replaceAll(s.with, status);
    MTNLG_CHECK_MSG(U_SUCCESS(status), "ICU regex replace failed: " << u_errorName(status));
    text = std::move(out);
  }
}

// Punkt's patterns (nltk/tokenize/punkt.py, PunktLanguageVars for English).
constexpr std::string_view kNonWord = R"re((?:[\)";\}\]\*:@'\(\{\[\?!]))re";
constexpr std::string_view kMultiChar = R"re((?:\-{2,}|\.{2,}|(?:\.{S}){2,}\.))re";
constexpr std::string_view kWordStart = R"re([^\("`\{\[:;\&#\*@\)\}\]\-,])re";

struct PunktPatterns {
  // PunktLanguageVars.word_tokenize's pattern (its one group is the whole match).
  std::unique_ptr<RegexPattern> word =
      compile(std::string(kMultiChar) + "|(?=" + std::string(kWordStart) + "){NS}+?(?={S}|{END}|" +
              std::string(kNonWord) + "|" + std::string(kMultiChar) + "|,(?={END}|{S}|" +
              std::string(kNonWord) + "|" + std::string(kMultiChar) + "))|{NS}");
  // period_context_re: group 1 after_tok, group 2 next_tok.
  std::unique_ptr<RegexPattern> period_context =
      compile("[.?!](?=(" + std::string(kNonWord) + "|{S}+({NS}+)))");
  // re_boundary_realignment (MULTILINE: its $ is before any newline).
  std::unique_ptr<RegexPattern> realign = compile(R"re(["'\)\]\}]+?(?:{S}+|(?=--)|(?=\n|\z)))re");
};

const Treebank& treebank() {
  static const Treebank t;
  return t;
}

const PunktPatterns& punkt() {
  static const PunktPatterns p;
  return p;
}

std::u32string to_u32(const UnicodeString& s) {
  std::u32string out(static_cast<size_t>(s.countChar32()), U'\0');
  UErrorCode status = U_ZERO_ERROR;
  s.toUTF32(reinterpret_cast<UChar32*>(out.data()), static_cast<int32_t>(out.size()), status);
  return out;
}

UnicodeString from_u32(const std::u32string& s) {
  return UnicodeString::fromUTF32(reinterpret_cast<const UChar32*>(s.data()),
                                  static_cast<int32_t>(s.size()));
}

std::vector<UnicodeString> treebank_tokens(UnicodeString text) {
  const Treebank& tb = treebank();
  substitute_all(tb.before_padding, text);
  text = UnicodeString(u" ") + text + UnicodeString(u" ");
  substitute_all(tb.after_padding, text);
  // str.split()
  std::vector<UnicodeString> words;
  int32_t i = 0;
  const int32_t n = text.length();
  while (i < n) {
    while (i < n && python_isspace(static_cast<char32_t>(text.char32At(i))))
      i = text.moveIndex32(i, 1);
    int32_t j = i;
    while (j < n && !python_isspace(static_cast<char32_t>(text.char32At(j))))
      j = text.moveIndex32(j, 1);
    if (j > i) words.emplace_back(text, i, j - i);
    i = j;
  }
  return words;
}

// ---- Punkt ----

constexpr int kBegUc = 1 << 1, kMidUc = 1 << 2, kUnkUc = 1 << 3;
constexpr int kBegLc = 1 << 4, kMidLc = 1 << 5, kUnkLc = 1 << 6;
constexpr int kUc = kBegUc + kMidUc + kUnkUc, kLc = kBegLc + kMidLc + kUnkLc;

bool is_nd(char32_t c) {
  return u_charType(static_cast<UChar32>(c)) == U_DECIMAL_DIGIT_NUMBER;
}

// _RE_NUMERIC, ^-?[\.,]?\d[\d,\.-]*\.?$, on a whole (newline-free) token.
bool numeric(const std::u32string& s) {
  size_t i = 0;
  if (i < s.size() && s[i] == U'-') ++i;
  if (i < s.size() && (s[i] == U'.' || s[i] == U',')) ++i;
  if (i == s.size() || !is_nd(s[i])) return false;
  ++i;
  while (i < s.size() && (is_nd(s[i]) || s[i] == U',' || s[i] == U'.' || s[i] == U'-')) ++i;
  return i == s.size();
}

struct PunktToken {
  std::u32string tok, type;
  bool period_final = false, sentbreak = false, abbr = false, ellipsis = false;

  explicit PunktToken(std::u32string t) : tok(std::move(t)) {
    const std::u32string lower = python_lower(tok);
    type = numeric(lower) ? U"##number##" : lower;
    period_final = !tok.empty() && tok.back() == U'.';
  }
  std::u32string type_no_period() const {
    return type.size() > 1 && type.back() == U'.' ? type.substr(0, type.size() - 1) : type;
  }
  std::u32string type_no_sentperiod() const { return sentbreak ? type_no_period() : type; }
  bool first_upper() const { return u_isUUppercase(static_cast<UChar32>(tok[0])) != 0; }
  bool first_lower() const { return u_isULowercase(static_cast<UChar32>(tok[0])) != 0; }
  // _RE_ELLIPSIS, \.\.+$
  bool is_ellipsis() const {
    return tok.size() >= 2 && tok.find_first_not_of(U'.') == std::u32string::npos;
  }
  // _RE_INITIAL, [^\W\d]\.$: a word character but a digit, then a period.
  bool is_initial() const {
    return tok.size() == 2 && tok[1] == U'.' && python_word_char(tok[0]) && !is_nd(tok[0]);
  }
};

enum class Ortho { kFalse, kTrue, kUnknown };

class PunktSentences {
 public:
  PunktSentences(const UnicodeString& text, const PunktModel& model) : text_(text), m_(model) {}

  // span_tokenize(text) in UTF-16 units.
  std::vector<std::pair<int32_t, int32_t>> spans() const { return realign(slices()); }

 private:
  struct EndMatch {
    int32_t start, end;   // the sentence-end character
    UnicodeString after;  // after_tok
    int32_t next_tok;     // next_tok's start, or -1
  };

  int ortho_context(const std::u32string& type) const {
    const auto it = m_.ortho_context.find(type);
    return it == m_.ortho_context.end() ? 0 : it->second;
  }

  // PunktLanguageVars.word_tokenize over each non-blank line (_tokenize_words).
  std::vector<PunktToken> tokenize_words(const UnicodeString& text) const {
    std::vector<PunktToken> toks;
    int32_t line_start = 0;
    const int32_t n = text.length();
    while (line_start <= n) {
      int32_t line_end = text.indexOf(u'\n', line_start);
      if (line_end < 0) line_end = n;
      const UnicodeString line = text.tempSubStringBetween(line_start, line_end);
      bool blank = true;
      for (int32_t i = 0; i < line.length() && blank; i = line.moveIndex32(i, 1))
        blank = python_isspace(static_cast<char32_t>(line.char32At(i)));
      if (!blank) {
        UErrorCode status = U_ZERO_ERROR;
        std::unique_ptr<RegexMatcher> m(punkt().word->matcher(line, status));
        while (m->find(status)) toks.emplace_back(to_u32(m->group(status)));
      }
      line_start = line_end + 1;
    }
    return toks;
  }

  void first_pass(PunktToken& t) const {
    if (t.tok == U"." || t.tok == U"?" || t.tok == U"!") {
      t.sentbreak = true;
    } else if (t.is_ellipsis()) {
      t.ellipsis = true;
    } else if (t.period_final && !(t.tok.size() >= 2 && t.tok[t.tok.size() - 2] == U'.')) {
      const std::u32string base = python_lower(t.tok.substr(0, t.tok.size() - 1));
      const size_t dash = base.rfind(U'-');
      const std::u32string last = dash == std::u32string::npos ? base : base.substr(dash + 1);
      if (m_.abbrev_types.count(base) || m_.abbrev_types.count(last)) {
        t.abbr = true;
      } else {
        t.sentbreak = true;
      }
    }
  }

  Ortho ortho_heuristic(const PunktToken& t) const {
    static const std::u32string punctuation = U";:,.!?";
    if (t.tok.size() == 1 && punctuation.find(t.tok[0]) != std::u32string::npos)
      return Ortho::kFalse;
    const int oc = ortho_context(t.type_no_sentperiod());
    if (t.first_upper() && (oc & kLc) && !(oc & kMidUc)) return Ortho::kTrue;
    if (t.first_lower() && ((oc & kUc) || !(oc & kBegLc))) return Ortho::kFalse;
    return Ortho::kUnknown;
  }

  void second_pass(PunktToken& t1, const PunktToken& t2) const {
    if (!t1.period_final) return;
    const std::u32string typ = t1.type_no_period(), next_typ = t2.type_no_sentperiod();
    const bool initial = t1.is_initial();
    if (m_.collocations.count({typ, next_typ})) {
      t1.sentbreak = false;
      t1.abbr = true;
      return;
    }
    if ((t1.abbr || t1.ellipsis) && !initial) {
      if (ortho_heuristic(t2) == Ortho::kTrue) {
        t1.sentbreak = true;
        return;
      }
      if (t2.first_upper() && m_.sent_starters.count(next_typ)) {
        t1.sentbreak = true;
        return;
      }
    }
    if (initial || typ == U"##number##") {
      const Ortho h = ortho_heuristic(t2);
      if (h == Ortho::kFalse) {
        t1.sentbreak = false;
        t1.abbr = true;
        return;
      }
      if (h == Ortho::kUnknown && initial && t2.first_upper() && !(ortho_context(next_typ) & kLc)) {
        t1.sentbreak = false;
        t1.abbr = true;
      }
    }
  }

  // text_contains_sentbreak: a sentence break before the context's last token.
  bool contains_sentbreak(const UnicodeString& context) const {
    std::vector<PunktToken> toks = tokenize_words(context);
    for (PunktToken& t : toks) first_pass(t);
    for (size_t i = 0; i + 1 < toks.size(); ++i) second_pass(toks[i], toks[i + 1]);
    for (size_t i = 0; i + 1 < toks.size(); ++i)
      if (toks[i].sentbreak) return true;
    return false;
  }

  // _match_potential_end_contexts: each candidate end with the text it is decided on (the word
  // before it, itself, and what follows); a candidate whose word overlaps the next one's is
  // dropped, as NLTK drops it.
  std::vector<std::pair<EndMatch, UnicodeString>> end_contexts() const {
    std::vector<std::pair<EndMatch, UnicodeString>> out;
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<RegexMatcher> m(punkt().period_context->matcher(text_, status));
    int32_t prev_start = 0, prev_stop = 0;
    std::optional<EndMatch> prev;
    const auto context = [&](const EndMatch& e) {
      return UnicodeString(text_, prev_start, prev_stop - prev_start) +
             UnicodeString(text_, e.start, e.end - e.start) + e.after;
    };
    while (m->find(status)) {
      EndMatch e{m->start(status), m->end(status), m->group(1, status), m->start(2, status)};
      // _get_last_whitespace_index over text[prev_stop:start] (string.whitespace; index 0
      // counts as none, as NLTK's truth test does).
      int32_t last_space = 0;
      for (int32_t i = e.start - 1; i >= prev_stop; --i) {
        const char16_t c = text_.charAt(i);
        if (c == u' ' || c == u'\t' || c == u'\n' || c == u'\r' || c == 0x0b || c == 0x0c) {
          last_space = i - prev_stop;
          break;
        }
      }
      const int32_t word_start = last_space ? last_space + prev_stop + 1 : prev_start;
      if (prev && prev_stop <= word_start) out.emplace_back(*prev, context(*prev));
      prev = e;
      prev_start = word_start;
      prev_stop = e.start;
    }
    if (prev) out.emplace_back(*prev, context(*prev));
    return out;
  }

  int32_t rstripped_length(const UnicodeString& s) const {
    int32_t n = s.length();
    while (n > 0 && python_isspace(static_cast<char32_t>(s.charAt(n - 1)))) --n;
    return n;
  }

  // _slices_from_text.
  std::vector<std::pair<int32_t, int32_t>> slices() const {
    std::vector<std::pair<int32_t, int32_t>> out;
    int32_t last_break = 0;
    for (const auto& [e, context] : end_contexts()) {
      if (!contains_sentbreak(context)) continue;
      out.emplace_back(last_break, e.end);
      last_break = e.next_tok >= 0 ? e.next_tok : e.end;
    }
    out.emplace_back(last_break, rstripped_length(text_));
    return out;
  }

  // _realign_boundaries: closing quotes and brackets after an end join its sentence.
  std::vector<std::pair<int32_t, int32_t>> realign(
      const std::vector<std::pair<int32_t, int32_t>>& slices) const {
    std::vector<std::pair<int32_t, int32_t>> out;
    int32_t shift = 0;
    for (size_t i = 0; i < slices.size(); ++i) {
      const std::pair<int32_t, int32_t> s1{slices[i].first + shift, slices[i].second};
      if (i + 1 == slices.size()) {
        if (s1.first < s1.second) out.push_back(s1);
        continue;
      }
      const auto& s2 = slices[i + 1];
      const UnicodeString next(text_, s2.first, std::max(0, s2.second - s2.first));
      UErrorCode status = U_ZERO_ERROR;
      std::unique_ptr<RegexMatcher> m(punkt().realign->matcher(next, status));
      if (m->lookingAt(status)) {
        out.emplace_back(s1.first, s2.first + rstripped_length(m->group(status)));
        shift = m->end(status);
      } else {
        shift = 0;
        if (s1.first < s1.second) out.push_back(s1);
      }
    }
    return out;
  }

  const UnicodeString& text_;
  const PunktModel& m_;
};

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw not_found(
        "cannot open a Punkt model file (NLTK's punkt_tab: python3 -m nltk.downloader punkt_tab)",
        path);
  }
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  if (in.bad()) throw io_error("cannot read a Punkt model file", path);
  return lines;
}

std::u32string type_of(const std::string& s, const std::string& path, size_t line) {
  if (!is_valid_utf8(s))
    throw corruption("line " + std::to_string(line) + " is not valid UTF-8", path);
  return utf8_to_u32(s);
}

}  // namespace

PunktModel read_punkt_model(const std::string& dir) {
  PunktModel m;
  for (const char* name : {"abbrev_types.txt", "sent_starters.txt"}) {
    const std::string path = dir + "/" + name;
    const auto lines = lines_of(path);
    auto& set = std::string_view(name) == "abbrev_types.txt" ? m.abbrev_types : m.sent_starters;
    for (size_t i = 0; i < lines.size(); ++i)
      if (!lines[i].empty()) set.insert(type_of(lines[i], path, i + 1));
  }
  {
    const std::string path = dir + "/collocations.tab";
    const auto lines = lines_of(path);
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].empty()) continue;
      const size_t tab = lines[i].find('\t');
      if (tab == std::string::npos || lines[i].find('\t', tab + 1) != std::string::npos)
        throw corruption("line " + std::to_string(i + 1) + " is not two types separated by a tab",
                         path);
      m.collocations.emplace(type_of(lines[i].substr(0, tab), path, i + 1),
                             type_of(lines[i].substr(tab + 1), path, i + 1));
    }
  }
  {
    const std::string path = dir + "/ortho_context.tab";
    const auto lines = lines_of(path);
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].empty()) continue;
      const size_t tab = lines[i].rfind('\t');
      const std::string flags = tab == std::string::npos ? "" : lines[i].substr(tab + 1);
      if (flags.empty() || flags.size() > 3 ||
          flags.find_first_not_of("0123456789") != std::string::npos || std::stoi(flags) > 127)
        throw corruption("line " + std::to_string(i + 1) +
                             " is not a type, a tab and its flags (an integer of 0-127)",
                         path);
      m.ortho_context[type_of(lines[i].substr(0, tab), path, i + 1)] = std::stoi(flags);
    }
  }
  return m;
}

std::vector<std::pair<size_t, size_t>> punkt_sentence_spans(const std::u32string& text,
                                                            const PunktModel& model) {
  const UnicodeString t = from_u32(text);
  // UTF-16 offsets to code points.
  std::vector<size_t> cp(static_cast<size_t>(t.length()) + 1, 0);
  for (int32_t i = 0, k = 0; i <= t.length(); ++i) {
    cp[static_cast<size_t>(i)] = static_cast<size_t>(k);
    if (i < t.length() && !U16_IS_TRAIL(t.charAt(i))) ++k;
  }
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& [a, b] : PunktSentences(t, model).spans())
    out.emplace_back(cp[static_cast<size_t>(a)], cp[static_cast<size_t>(std::max(a, b))]);
  return out;
}

std::vector<std::u32string> nltk_treebank_words(const std::u32string& text) {
  std::vector<std::u32string> out;
  for (const UnicodeString& w : treebank_tokens(from_u32(text))) out.push_back(to_u32(w));
  return out;
}

std::vector<std::u32string> nltk_word_tokenize(const std::u32string& text,
                                               const PunktModel& model) {
  const UnicodeString t = from_u32(text);
  std::vector<std::u32string> out;
  for (const auto& [a, b] : PunktSentences(t, model).spans())
    for (const UnicodeString& w : treebank_tokens(UnicodeString(t, a, std::max(0, b - a))))
      out.push_back(to_u32(w));
  return out;
}

}  // namespace mtnlg::curate
