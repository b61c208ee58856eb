#include "data/gpt2_pretokenizer.h"

namespace mtnlg {

namespace {

// Length (in code points, 2 or 3) of the contraction 's 't 're 've 'm 'll 'd at i, or 0.
// Case-sensitive, as in GPT-2: "'S" is not a contraction.
size_t contraction_at(const std::vector<char32_t>& c, size_t i) {
  const size_t n = c.size();
  if (c[i] != U'\'' || i + 1 >= n) return 0;
  const char32_t a = c[i + 1];
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  if (i + 2 >= n) return 0;
  const char32_t b = c[i + 2];
  if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
  return 0;
}

}  // namespace

void gpt2_pretokenize(std::string_view text, PretokenizerScratch& scratch,
                      std::vector<std::string_view>* pieces) {
  pieces->clear();
  auto& cls = scratch.classes;
  auto& chars = scratch.chars;
  auto& offsets = scratch.offsets;
  cls.clear();
  chars.clear();
  offsets.clear();
  for (size_t pos = 0; pos < text.size();) {
    char32_t cp = static_cast<unsigned char>(text[pos]);
    const size_t len = cp < 0x80 ? 1 : decode_utf8(text.substr(pos), &cp);
    chars.push_back(cp);
    cls.push_back(char_class(cp));
    offsets.push_back(pos);
    pos += len;
  }
  offsets.push_back(text.size());
  const size_t n = chars.size();
  auto emit = [&](size_t from, size_t to) {
    pieces->push_back(text.substr(offsets[from], offsets[to] - offsets[from]));
  };

  size_t i = 0;
  while (i < n) {
    // 's|'t|'re|'ve|'m|'ll|'d
    if (const size_t len = contraction_at(chars, i); len > 0) {
      emit(i, i + len);
      i += len;
      continue;
    }
    // ' ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+': a run of one class, with one optional leading
    // U+0020. A space not followed by a non-space matches none of the three.
    size_t start = i;
    if (chars[i] == U' ' && i + 1 < n && cls[i + 1] != CharClass::kSpace) start = i + 1;
    if (cls[start] != CharClass::kSpace) {
      size_t end = start + 1;
      while (end < n && cls[end] == cls[start]) ++end;
      emit(i, end);
      i = end;
      continue;
    }
    // '\s+(?!\S)|\s+': the whitespace run, less its last character when a non-space follows
    // (that character then leads the next piece), unless the run is a single character.
    size_t end = i + 1;
    while (end < n && cls[end] == CharClass::kSpace) ++end;
    if (end < n && end - i > 1) --end;
    emit(i, end);
    i = end;
  }
}

}  // namespace mtnlg
