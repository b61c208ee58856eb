// UTF-8 as Python decodes it: the one replacement of ill-formed bytes, used by every JSON line
// (core/metrics.h json_string) and by the tokenizer's decode (data/unicode_classes.h).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace mtnlg {

// The end of the ASCII run of `s` that starts at byte `i` (the first byte >= 0x80 at or after
// i, or s.size()): eight bytes at a time, as most text is ASCII.
inline size_t ascii_run_end(std::string_view s, size_t i) {
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t eight;
    std::memcpy(&eight, s.data() + i, 8);
    if ((eight & 0x8080808080808080ull) != 0) break;
  }
  while (i < s.size() && static_cast<unsigned char>(s[i]) < 0x80) ++i;
  return i;
}

// `s` with every maximal ill-formed subpart replaced by U+FFFD (EF BF BD), as Python's
// bytes.decode("utf-8", errors="replace") does (Unicode's table 3-7: no overlongs, no
// surrogates, nothing above U+10FFFF).
std::string replace_invalid_utf8(std::string_view s);

}  // namespace mtnlg
