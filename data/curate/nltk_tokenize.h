// NLTK's English tokenizers as DataTrove's Gopher and C4 filters call them (its NLTKTokenizer:
// `nltk.word_tokenize(text)` for words, Punkt's `span_tokenize` for sentences), so that the
// filters' word and sentence counts are DataTrove's:
//
//   word_tokenize(text) = NLTKWordTokenizer().tokenize(s) for each Punkt sentence s of text
//
// Punkt (Kiss & Strunk 2006) as NLTK 3.8 implements its tokenizing half (PunktSentenceTokenizer
// with realign_boundaries): candidate ends found by its period-context pattern, each decided by
// its first pass (sentence-end characters, ellipses, known abbreviations) and second pass
// (collocations, the orthographic heuristic, sentence starters, initials and numbers), then the
// boundaries realigned past closing quotes and brackets. The trained part (abbreviations,
// collocations, sentence starters, orthographic contexts) is a model read from NLTK's
// `punkt_tab` files: this module trains nothing and ships no model.
//
// NLTKWordTokenizer: NLTK's improved Treebank tokenizer, its substitutions in order (starting
// quotes, punctuation, brackets, double dashes, ending quotes, contractions), then str.split().
//
// Python's regular-expression semantics are kept by spelling its classes out for ICU's engine:
// `\w` is [\p{L}\p{N}_] (str.isalnum() or '_': equal over all of Unicode 14), `\s` Python's
// str.isspace() set, `\b` the transitions between those word characters and the rest, and `$`
// the end or a final newline.
//
// Thread-safe (the compiled patterns are shared read-only; each call makes its own matchers).
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace mtnlg::curate {

// A Punkt model: the parameters NLTK's PunktParameters holds.
struct PunktModel {
  std::unordered_set<std::u32string> abbrev_types, sent_starters;
  std::set<std::pair<std::u32string, std::u32string>> collocations;
  std::map<std::u32string, int> ortho_context;  // a type's orthographic flags (absent: 0)
};

// Reads NLTK's punkt_tab files of one language from dir (as `python3 -m nltk.downloader
// punkt_tab` installs them: nltk_data/tokenizers/punkt_tab/english/): abbrev_types.txt and
// sent_starters.txt (a type a line), collocations.tab (two types a line, tab-separated) and
// ortho_context.tab (a type and its flags, tab-separated). A missing file or a malformed line is
// an error naming the file and the line.
PunktModel read_punkt_model(const std::string& dir);

// PunktSentenceTokenizer(model).span_tokenize(text): each sentence's [begin, end) in code points.
std::vector<std::pair<size_t, size_t>> punkt_sentence_spans(const std::u32string& text,
                                                            const PunktModel& model);

// NLTKWordTokenizer().tokenize(text).
std::vector<std::u32string> nltk_treebank_words(const std::u32string& text);

// nltk.word_tokenize(text) with `model` as its Punkt: the words of each sentence in turn.
std::vector<std::u32string> nltk_word_tokenize(const std::u32string& text, const PunktModel& model);

}  // namespace mtnlg::curate
