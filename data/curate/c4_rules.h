// The C4 rules (Raffel et al. 2020), as DataTrove's C4QualityFilter applies them to a document.
// Each rule is off unless asked. The text's lines are Python's str.splitlines(), each stripped of
// whitespace, and a line's words are its str.split(). Line by line, in this order:
//   c4_too_long_word      a word longer than max_word_length code points: the line is dropped
//   (remove_citations)    "[123]", "[]", "[edit]" and "[citation needed]" are cut from the line
//   c4_no_terminal_punct  the line does not end in . ? ! " ' or ends in "...": dropped
//   c4_too_few_words      fewer than min_words_per_line words (counted before the cut): dropped
//   c4_lorem_ipsum        "lorem ipsum" in the lower-cased line: the document is removed
//   c4_javascript         "javascript" in the lower-cased line: dropped
//   c4_curly_bracket      "{" in the line: the document is removed
//   c4_policy             "terms of use", "privacy policy", "cookie policy", "uses cookies",
//                         "use of cookies" or "use cookies" in the lower-cased line: dropped
// and then, over the kept lines:
//   c4_too_few_sentences  fewer than min_sentences sentences: the document is removed.
// A kept document's text becomes its kept lines joined by "\n" (stripped). The document rules
// (lorem ipsum, curly bracket) see only the lines the earlier line rules kept, as in DataTrove.
//
// Sentences: DataTrove counts them with NLTK's Punkt (a line's spans, one at least). With a Punkt
// model (NLTK's punkt_tab files, which Debian does not ship) they are Punkt's, as DataTrove's.
// Without one, a sentence ends at a run of . ! or ? (closing quotes and brackets may follow) that
// whitespace follows and then an upper-case letter, a decimal digit or an opening quote or
// bracket: the counts agree with Punkt on ordinary prose and differ on abbreviations ("Dr. Smith"
// counts two).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace mtnlg::curate {

struct C4Rules {
  int64_t max_word_length = -1;  // c4_too_long_word; -1 off (DataTrove: 1000)
  bool remove_citations = false;
  bool terminal_punct = false;      // c4_no_terminal_punct
  int64_t min_words_per_line = -1;  // c4_too_few_words; -1 off (DataTrove: 3)
  bool lorem_ipsum = false;         // c4_lorem_ipsum (document)
  bool javascript = false;          // c4_javascript
  bool curly_bracket = false;       // c4_curly_bracket (document)
  bool policy = false;              // c4_policy
  int64_t min_sentences = -1;       // c4_too_few_sentences (document); -1 off (DataTrove: 5)
  bool any() const;
};

// DataTrove's C4QualityFilter defaults for every rule not set yet.
void apply_c4_defaults(C4Rules* c);

struct C4Result {
  std::string removed_by;  // the document rule that removed it, or ""
  std::string text;        // the kept lines joined, when not removed
  // Lines dropped by rule (c4_too_long_word, ...), and "c4_lines_kept".
  std::map<std::string, int64_t> lines;
};

struct PunktModel;
// punkt: count sentences with this Punkt model (null: the rule above).
C4Result apply_c4(const std::string& utf8, const C4Rules& c, const PunktModel* punkt = nullptr);

// Sentences in a line by the rule above.
int64_t count_sentences(const std::u32string& line);

}  // namespace mtnlg::curate
