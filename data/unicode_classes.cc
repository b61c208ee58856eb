#include "data/unicode_classes.h"

#include <unicode/uchar.h>

#include <array>

namespace mtnlg {

namespace {

constexpr std::array<CharClass, 128> make_ascii_classes() {
  std::array<CharClass, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      t[c] = CharClass::kLetter;
    } else if (c >= '0' && c <= '9') {
      t[c] = CharClass::kNumber;
    } else if (c == ' ' || (c >= 0x09 && c <= 0x0d)) {  // \t \n \v \f \r: White_Space
      t[c] = CharClass::kSpace;
    } else {
      t[c] = CharClass::kOther;  // includes 0x1c-0x1f, which str.isspace() accepts but \s not
    }
  }
  return t;
}

constexpr std::array<CharClass, 128> kAsciiClasses = make_ascii_classes();

bool is_continuation(unsigned char b) {
  return (b & 0xC0) == 0x80;
}

}  // namespace

CharClass char_class(char32_t cp) {
  if (cp < 128) return kAsciiClasses[cp];
  const auto c = static_cast<UChar32>(cp);
  if (u_hasBinaryProperty(c, UCHAR_WHITE_SPACE)) return CharClass::kSpace;
  const int32_t mask = U_GET_GC_MASK(c);
  if (mask & U_GC_L_MASK) return CharClass::kLetter;
  if (mask & U_GC_N_MASK) return CharClass::kNumber;
  return CharClass::kOther;
}

size_t decode_utf8(std::string_view s, char32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[0]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  // Unicode's table of well-formed sequences (3-7): the lead byte fixes the length and the
  // range of the second byte; later bytes are plain continuations.
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  char32_t value = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    value = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    value = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    value = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *cp = kReplacementChar;  // a stray continuation byte, C0, C1 or F5..FF
    return 1;
  }
  for (size_t i = 1; i < len; ++i) {
    if (i >= s.size()) {
      *cp = kReplacementChar;  // truncated: the valid prefix is one subpart
      return i;
    }
    const auto b = static_cast<unsigned char>(s[i]);
    const bool ok = i == 1 ? (b >= lo && b <= hi) : is_continuation(b);
    if (!ok) {
      *cp = kReplacementChar;
      return i;
    }
    value = (value << 6) | (b & 0x3F);
  }
  *cp = value;
  return len;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while ((i = ascii_run_end(s, i)) < s.size()) {
    char32_t cp;
    const size_t n = decode_utf8(s.substr(i), &cp);
    if (cp == kReplacementChar && n < 3) return false;  // a real U+FFFD takes 3 bytes
    if (cp == kReplacementChar && s.compare(i, 3, "\xEF\xBF\xBD") != 0) return false;
    i += n;
  }
  return true;
}

}  // namespace mtnlg
