// Sentence splitting for mtnlg-preprocess --split-sentences: ICU's sentence break iterator
// (Unicode UAX #29 sentence boundaries, English rules), where Megatron-LM's preprocess_data.py
// uses NLTK's punkt model. The two agree on ordinary prose ("He left. She stayed." is two
// sentences to both, a lowercase word or a digit after a period continues the sentence, "Mr."
// is on both abbreviation lists); they differ where the lists differ ("Dr. Smith" splits after
// "Dr." under ICU, not under punkt), and ICU also ends a sentence at every line or paragraph
// separator, where punkt joins lines.
//
// Like punkt's tokenize(), a sentence does not keep the whitespace that follows it; with
// keep_newlines (Megatron's --keep-newlines, its CustomLanguageVars) the whitespace after a
// sentence, newlines included, stays at the sentence's end. Sentences that are empty or only
// whitespace are dropped.
//
// Thread safety: one SentenceSplitter per thread (ICU break iterators are not thread-safe).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mtnlg {

class SentenceSplitter {
 public:
  explicit SentenceSplitter(bool keep_newlines);
  ~SentenceSplitter();
  SentenceSplitter(const SentenceSplitter&) = delete;
  SentenceSplitter& operator=(const SentenceSplitter&) = delete;

  // The sentences of UTF-8 `text` (invalid bytes read as U+FFFD), in order.
  std::vector<std::string> split(std::string_view text);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool keep_newlines_;
};

}  // namespace mtnlg
