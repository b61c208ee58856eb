// The one scan JSON strings need in both directions: where the next byte that a JSON string
// cannot hold as is ('"', '\\' or a control character) lies. Reading a record's text and writing
// a piece's both spend most of their time here; eight bytes are tested at a time.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace mtnlg {

inline bool json_needs_escape(unsigned char c) {
  return c < 0x20 || c == '"' || c == '\\';
}

// The index of the first byte at or after `i` that needs an escape, or s.size().
inline size_t json_plain_run_end(std::string_view s, size_t i) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHighs = 0x8080808080808080ull;
  // A byte of v is zero, or (with `below`) below 0x20: the standard bit tricks, exact on whether
  // any byte is one (the byte loop below finds which).
  const auto zero_byte = [](uint64_t v) { return (v - kOnes) & ~v & kHighs; };
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t x;
    std::memcpy(&x, s.data() + i, 8);
    const uint64_t hit = zero_byte(x ^ (kOnes * '"')) | zero_byte(x ^ (kOnes * '\\')) |
                         ((x - kOnes * 0x20) & ~x & kHighs);
    if (hit != 0) break;
  }
  while (i < s.size() && !json_needs_escape(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

}  // namespace mtnlg
