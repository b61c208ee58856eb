#include "data/python_text.h"

#include <unicode/uchar.h>

#include "data/unicode_classes.h"

namespace mtnlg {

namespace {

bool cased(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED);
}
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

// final_sigma on UTF-8: the capital sigma at bytes [begin, end) of t.
bool final_sigma_utf8(std::string_view t, size_t begin, size_t end) {
  size_t j = begin;
  bool cased_before = false;
  while (j > 0) {
    size_t k = j - 1;
    while (k > 0 && (static_cast<unsigned char>(t[k]) & 0xC0) == 0x80) --k;
    char32_t c;
    decode_utf8(t.substr(k), &c);
    j = k;
    if (!case_ignorable(c)) {
      cased_before = cased(c);
      break;
    }
  }
  if (!cased_before) return false;
  for (size_t k = end; k < t.size();) {
    char32_t c;
    k += decode_utf8(t.substr(k), &c);
    if (!case_ignorable(c)) return !cased(c);
  }
  return true;
}

}  // namespace

std::u32string python_lower(const std::u32string& text) {
  // One output slot per code point but for 'İ' (two): counted first, so that the loop writes by
  // index (no per-character capacity check) and ASCII costs a compare and a store.
  size_t extra = 0;
  for (const char32_t c : text) extra += c == 0x130;
  std::u32string out(text.size() + extra, U'\0');
  char32_t* o = out.data();
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c < 0x80) {
      *o++ = c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
    } else if (c == 0x130) {  // the one unconditional multi-character lower-case mapping
      *o++ = U'i';
      *o++ = 0x307;
    } else if (c == 0x3A3) {
      *o++ = final_sigma(text, i) ? 0x3C2 : 0x3C3;
    } else {
      *o++ = static_cast<char32_t>(u_tolower(static_cast<UChar32>(c)));
    }
  }
  return out;
}

void python_lower_utf8(std::string_view text, std::string* lowered) {
  lowered->clear();
  lowered->reserve(text.size() + 8);
  const auto ascii_lower = [](unsigned char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
  };
  size_t i = 0;
  while (i < text.size()) {
    // An ASCII run, lowered by index into its place; then one other code point.
    size_t j = i;
    while (j < text.size() && static_cast<unsigned char>(text[j]) < 0x80) ++j;
    const size_t at = lowered->size();
    lowered->resize(at + (j - i));
    char* o = lowered->data() + at;
    for (size_t k = i; k < j; ++k) o[k - i] = ascii_lower(static_cast<unsigned char>(text[k]));
    i = j;
    if (i == text.size()) break;
    char32_t cp;
    const size_t n = decode_utf8(text.substr(i), &cp);
    if (cp == 0x130) {
      lowered->append("i\xCC\x87");  // 'i' + U+0307
    } else if (cp == 0x3A3) {
      lowered->append(final_sigma_utf8(text, i, i + n) ? "\xCF\x82" : "\xCF\x83");
    } else {
      append_utf8(static_cast<char32_t>(u_tolower(static_cast<UChar32>(cp))), *lowered);
    }
    i += n;
  }
}

bool python_lower_tail_matches(std::string_view text, size_t from) {
  for (size_t i = from; i < text.size();) {
    char32_t c;
    const size_t n = decode_utf8(text.substr(i), &c);
    if (c == 0x3A3) return !final_sigma_utf8(text, i, i + n);
    if (!case_ignorable(c)) return true;
    i += n;
  }
  return true;
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
