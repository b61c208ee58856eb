// GPT-2's pre-tokenizer: splits text into the pieces that BPE then encodes one by one, exactly
// as GPT-2's encoder.py does with the Python `regex` pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// implemented by hand (one pass over code points, no regex engine): at each position the first
// alternative that matches wins, each alternative taking the longest run it can.
//
// Stateless apart from the caller's scratch buffers: safe from any thread.
#pragma once

#include <string_view>
#include <vector>

#include "data/unicode_classes.h"

namespace mtnlg {

// Reusable buffers for gpt2_pretokenize (keep one per thread to avoid reallocations).
struct PretokenizerScratch {
  std::vector<CharClass> classes;  // [code points]
  std::vector<char32_t> chars;     // [code points]
  std::vector<size_t> offsets;     // [code points + 1]: byte offset of each code point
};

// Replaces *pieces with the pieces of `text`, which must be valid UTF-8 (pass it through
// replace_invalid_utf8 first otherwise). The pieces are views into `text`, in order, and
// concatenate to it.
void gpt2_pretokenize(std::string_view text, PretokenizerScratch& scratch,
                      std::vector<std::string_view>* pieces);

}  // namespace mtnlg
