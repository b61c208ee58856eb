// Unicode helpers for GPT-2's pre-tokenizer: the character classes its pattern uses (\p{L},
// \p{N}, \s) and a UTF-8 decoder that treats invalid bytes as Python does.
//
// Classes come from ICU (libicu-dev, the `uc` library): \p{L} and \p{N} are the general
// categories L* and N*, \s is the White_Space property, which is what Python's `regex` module
// (the ground truth: GPT-2's encoder.py) matches for str patterns. ICU 72 and the regex module
// of Debian 12 both implement Unicode 15.0; tests/data/gpt2_tokenizer_test.cc pins examples.
// ASCII is answered from a table without calling ICU.
//
// Invalid UTF-8 is decoded as Python's bytes.decode("utf-8", errors="replace") does (and
// WHATWG's decoder, so Node's TextDecoder too): each maximal subpart of an ill-formed sequence
// (a valid prefix of a well-formed sequence, or else one byte) becomes one U+FFFD.
//
// Free functions without state: safe from any thread.
#pragma once

#include "core/utf8.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mtnlg {

enum class CharClass : uint8_t {
  kOther,   // none of the below: punctuation, symbols, controls, U+FFFD, ...
  kLetter,  // \p{L}
  kNumber,  // \p{N}: decimal digits, letter numbers (Ⅻ), other numbers (², ½)
  kSpace,   // \s: Unicode White_Space
};

CharClass char_class(char32_t cp);

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the code point at the start of `s` (non-empty) into *cp and returns how many bytes it
// used (1 to 4). An ill-formed sequence yields U+FFFD and the length of its maximal subpart.
size_t decode_utf8(std::string_view s, char32_t* cp);

// Appends the UTF-8 encoding of `cp` (a scalar value, not a surrogate) to `out`.
void append_utf8(char32_t cp, std::string& out);

// True if `s` is well-formed UTF-8.
bool is_valid_utf8(std::string_view s);

// replace_invalid_utf8: core/utf8.h (one implementation for the tokenizer and JSON lines).

}  // namespace mtnlg
