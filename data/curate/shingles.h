// The shingles fuzzy deduplication compares: character 5-grams (code points) of a document's
// normalized text, as the corpus pipeline's dedup stage defines them:
//   1. NFC (ICU's normalizer),
//   2. lower-cased as Python's str.lower() (data/curate/python_text.h),
//   3. every run of whitespace (Python's str.isspace: general category Zs, or bidirectional
//      class WS, B or S) collapsed to one space, and the ends stripped.
// A text of fewer than 5 code points after that is a single shingle (the whole text, possibly
// empty). A shingle is the UTF-8 bytes of its code points: a slice of the normalized text.
//
// tests/curate/shingles_test.cc checks examples against Python's own functions
// (tests/reference/curate_reference.py).
//
// Free functions and a value type: safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/python_text.h"

namespace mtnlg::curate {

inline constexpr int kShingleChars = 5;

// A normalized text and where its code points start (plus its size at the end).
struct NormalizedText {
  std::string text;
  std::vector<uint32_t> starts;  // [code points + 1]
  int64_t code_points() const { return static_cast<int64_t>(starts.size()) - 1; }
  // The number of shingles: max(1, code points - 4).
  int64_t shingles() const;
  // Shingle i's bytes.
  std::string_view shingle(int64_t i) const;
};

// Steps 1-3 above. `utf8` must be well-formed UTF-8 (callers check: is_valid_utf8).
void normalize_for_shingles(std::string_view utf8, NormalizedText* out);

// A text normalize_for_shingles made, read back (dedup keeps them in a scratch file): its
// code points' starts found again.
void set_normalized_text(std::string text, NormalizedText* out);

// The distinct shingles of a normalized text, sorted bytewise (for exact Jaccard).
std::vector<std::string_view> distinct_shingles(const NormalizedText& t);

// |A ∩ B| / |A ∪ B| of two sorted distinct sets (1 when both are empty).
double jaccard(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b);

}  // namespace mtnlg::curate
