#include "core/utf8.h"

#include <utility>

namespace mtnlg {

namespace {

// The UTF-8 sequence at s[i] (Unicode's table 3-7: no overlongs, no surrogates, nothing above
// U+10FFFF): its bytes and whether it is well-formed. An ill-formed one is its maximal subpart
// (a lead byte and the continuation bytes that could still have followed it, at least one byte),
// which Python's bytes.decode(errors="replace") turns into one U+FFFD.
std::pair<size_t, bool> utf8_sequence(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  if (c < 0x80) return {1, true};
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return {1, false};
  }
  size_t k = 1;
  for (; k < n && i + k < s.size(); ++k) {
    const unsigned char b = at(i + k);
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
  }
  return {k, k == n};
}

}  // namespace

std::string replace_invalid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  // Well-formed runs are appended whole.
  size_t run = 0, i = 0;
  while ((i = ascii_run_end(s, i)) < s.size()) {
    const auto [n, ok] = utf8_sequence(s, i);
    if (!ok) {
      out.append(s.substr(run, i - run));
      out += "\xEF\xBF\xBD";
      run = i + n;
    }
    i += n;
  }
  out.append(s.substr(run));
  return out;
}

}  // namespace mtnlg
