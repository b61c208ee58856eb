// Python's str semantics the corpus stages and the evaluation tasks must reproduce, on code
// points: str.lower() (full lower-case mapping: each code point's simple mapping, 'İ' to 'i' +
// U+0307, and 'Σ' to final 'ς' by Python's Final_Sigma rule), str.isspace(), and re's `\w` for
// str patterns. Character properties come from ICU (Unicode 15; Debian 12's Python 3.11 has
// Unicode 14: the two differ only on characters added in 15).
//
// Free functions without state: safe from any thread.
#pragma once

#include <array>
#include <string>
#include <string_view>

namespace mtnlg {

// str.lower().
std::u32string python_lower(const std::u32string& text);
// str.lower() of well-formed UTF-8, as UTF-8 into *lowered (the same code points as
// python_lower; ill-formed bytes become U+FFFD's lower case, itself).
void python_lower_utf8(std::string_view text, std::string* lowered);
// Whether str.lower() of a tail text[from:] (UTF-8; `from` a code point's first byte) equals the
// tail of str.lower(text) where text[from] lowers to. Each code point lowers alone ('İ' to two,
// which moves where that tail starts but not what it holds) but for 'Σ', final ('ς') after a
// cased letter: the tail differs when a 'Σ' reached from `from` over case-ignorable characters
// alone is final in the whole text (in the tail nothing precedes it).
bool python_lower_tail_matches(std::string_view text, size_t from);
// str.isspace(): general category Zs, or bidirectional class WS, B or S.
bool python_isspace(char32_t cp);
// re's \w for a str pattern: str.isalnum() (letters, and characters with a numeric type) or '_'.
bool python_word_char_unicode(char32_t cp);
inline constexpr auto kAsciiWordChar = [] {
  std::array<bool, 128> t{};
  for (int c = 0; c < 128; ++c)
    t[c] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return t;
}();
inline bool python_word_char(char32_t c) {
  return c < 0x80 ? kAsciiWordChar[c] : python_word_char_unicode(c);
}

// UTF-8 (well-formed; ill-formed bytes become U+FFFD) <-> code points.
std::u32string utf8_to_u32(std::string_view s);
std::string u32_to_utf8(std::u32string_view s);

}  // namespace mtnlg
