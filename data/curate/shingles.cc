#include "data/curate/shingles.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <utility>

#include "core/status.h"
#include "data/python_text.h"
#include "data/unicode_classes.h"

namespace mtnlg::curate {

namespace {

bool ascii_only(std::string_view s) {
  for (const char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

}  // namespace

int64_t NormalizedText::shingles() const {
  return std::max<int64_t>(1, code_points() - (kShingleChars - 1));
}

std::string_view NormalizedText::shingle(int64_t i) const {
  if (code_points() < kShingleChars) return text;
  return std::string_view(text).substr(starts[i], starts[i + kShingleChars] - starts[i]);
}

void normalize_for_shingles(std::string_view utf8, NormalizedText* out) {
  std::string lowered;
  std::string_view source = utf8;
  if (ascii_only(utf8)) {
    // ASCII is NFC already, and lower-cases byte by byte.
    lowered.assign(utf8);
    for (char& c : lowered)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  } else {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
    if (U_FAILURE(status)) throw io_error(std::string("ICU NFC: ") + u_errorName(status));
    icu::UnicodeString u = icu::UnicodeString::fromUTF8(
        icu::StringPiece(utf8.data(), static_cast<int32_t>(utf8.size())));
    icu::UnicodeString n = nfc->normalize(u, status);
    if (U_FAILURE(status)) throw io_error(std::string("ICU NFC: ") + u_errorName(status));
    std::u32string composed(static_cast<size_t>(n.countChar32()), U'\0');
    n.toUTF32(reinterpret_cast<UChar32*>(composed.data()), static_cast<int32_t>(composed.size()),
              status);
    if (U_FAILURE(status)) throw io_error(std::string("ICU NFC: ") + u_errorName(status));
    lowered = u32_to_utf8(python_lower(composed));
  }
  source = lowered;
  // Collapse whitespace runs to one space and strip, recording where code points start.
  out->text.clear();
  out->starts.clear();
  out->text.reserve(source.size());
  out->starts.reserve(source.size() + 1);
  bool pending_space = false;
  size_t i = 0;
  while (i < source.size()) {
    char32_t cp;
    const size_t len = decode_utf8(source.substr(i), &cp);
    if (python_isspace(cp)) {
      pending_space = !out->text.empty();
    } else {
      if (pending_space) {
        out->starts.push_back(static_cast<uint32_t>(out->text.size()));
        out->text.push_back(' ');
        pending_space = false;
      }
      out->starts.push_back(static_cast<uint32_t>(out->text.size()));
      out->text.append(source.substr(i, len));
    }
    i += len;
  }
  out->starts.push_back(static_cast<uint32_t>(out->text.size()));
}

void set_normalized_text(std::string text, NormalizedText* out) {
  out->text = std::move(text);
  out->starts.clear();
  out->starts.reserve(out->text.size() + 1);
  for (size_t i = 0; i < out->text.size(); ++i)
    if ((static_cast<unsigned char>(out->text[i]) & 0xC0) != 0x80)  // not a continuation byte
      out->starts.push_back(static_cast<uint32_t>(i));
  out->starts.push_back(static_cast<uint32_t>(out->text.size()));
}

std::vector<std::string_view> distinct_shingles(const NormalizedText& t) {
  std::vector<std::string_view> s;
  const int64_t n = t.shingles();
  s.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) s.push_back(t.shingle(i));
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

double jaccard(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b) {
  if (a.empty() && b.empty()) return 1.0;
  size_t i = 0, j = 0, both = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i] < b[j]) {
      ++i;
    } else if (b[j] < a[i]) {
      ++j;
    } else {
      ++both;
      ++i;
      ++j;
    }
  }
  return static_cast<double>(both) / static_cast<double>(a.size() + b.size() - both);
}

}  // namespace mtnlg::curate
