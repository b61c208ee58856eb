#include "data/python_text.h"

#include <unicode/uchar.h>

#include "data/unicode_classes.h"

namespace mtnlg {

namespace {

bool cased(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED); }
bool case_ignorable(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASE_IGNORABLE);
}

// Python's handle_capital_sigma: final when a cased letter precedes (case-ignorables skipped)
// and none follows.
bool final_sigma(const std::u32string& t, size_t i) {
  size_t j = i;
  while (j > 0 && case_ignorable(t[j - 1])) --j;
  if (j == 0 || !cased(t[j - 1])) return false;
  size_t k = i + 1;
  while (k < t.size() && case_ignorable(t[k])) ++k;
  return k == t.size() || !cased(t[k]);
}

}  // namespace

std::u32string python_lower(const std::u32string& text) {
  // ASCII first, written in place (most text is): the general loop below only from the first
  // code point beyond it.
  std::u32string out(text.size(), U'\0');
  size_t i = 0;
  for (; i < text.size() && text[i] < 0x80; ++i) {
    const char32_t c = text[i];
    out[i] = c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
  }
  if (i == text.size()) return out;
  out.resize(i);
  out.reserve(text.size() + 8);
  for (; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c < 0x80) {
      out.push_back(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    } else if (c == 0x130) {  // the one unconditional multi-character lower-case mapping
      out.push_back(U'i');
      out.push_back(0x307);
    } else if (c == 0x3A3) {
      out.push_back(final_sigma(text, i) ? 0x3C2 : 0x3C3);
    } else {
      out.push_back(static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
    }
  }
  return out;
}

bool python_isspace(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20);
  const auto c = static_cast<UChar32>(cp);
  if (u_charType(c) == U_SPACE_SEPARATOR) return true;
  const UCharDirection d = u_charDirection(c);
  return d == U_WHITE_SPACE_NEUTRAL || d == U_BLOCK_SEPARATOR || d == U_SEGMENT_SEPARATOR;
}

bool python_word_char_unicode(char32_t c) {
  const auto u = static_cast<UChar32>(c);
  return u_isalpha(u) || u_getIntPropertyValue(u, UCHAR_NUMERIC_TYPE) != U_NT_NONE;
}

std::u32string utf8_to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    char32_t cp;
    i += decode_utf8(s.substr(i), &cp);
    out.push_back(cp);
  }
  return out;
}

std::string u32_to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char32_t c : s) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else {
      append_utf8(c, out);
    }
  }
  return out;
}

}  // namespace mtnlg
