#include "data/sentence_splitter.h"

#include <unicode/brkiter.h>
#include <unicode/locid.h>
#include <unicode/unistr.h>
#include <unicode/utypes.h>

#include "core/status.h"
#include "data/unicode_classes.h"

namespace mtnlg {

struct SentenceSplitter::Impl {
  std::unique_ptr<icu::BreakIterator> it;
};

SentenceSplitter::SentenceSplitter(bool keep_newlines)
    : impl_(std::make_unique<Impl>()), keep_newlines_(keep_newlines) {
  UErrorCode status = U_ZERO_ERROR;
  // "en@ss=standard": English with ICU's list of abbreviations that do not end a sentence.
  impl_->it.reset(
      icu::BreakIterator::createSentenceInstance(icu::Locale("en_US@ss=standard"), status));
  if (U_FAILURE(status) || !impl_->it)
    throw unsupported(std::string("ICU cannot make a sentence break iterator: ") +
                      u_errorName(status));
}

SentenceSplitter::~SentenceSplitter() = default;

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

std::vector<std::string> SentenceSplitter::split(std::string_view text) {
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  impl_->it->setText(u);
  std::vector<std::string> out;
  int32_t start = impl_->it->first();
  for (int32_t end = impl_->it->next(); end != icu::BreakIterator::DONE;
       start = end, end = impl_->it->next()) {
    std::string s;
    u.tempSubStringBetween(start, end).toUTF8String(s);
    // ICU's segment carries the whitespace after the sentence; punkt leaves it out.
    size_t keep = s.size();
    if (!keep_newlines_)
      while (keep > 0 && is_space(s[keep - 1])) --keep;
    size_t first = 0;
    while (first < keep && is_space(s[first])) ++first;
    if (first == keep) {
      // Only whitespace (ICU breaks after every line separator): with keep_newlines it is the
      // whitespace after the sentence before, so it goes there; otherwise it is dropped.
      if (keep_newlines_ && !out.empty()) out.back() += s;
      continue;
    }
    // Leading whitespace belongs to no sentence in punkt either (it starts at a word).
    out.push_back(s.substr(first, keep - first));
  }
  return out;
}

}  // namespace mtnlg
