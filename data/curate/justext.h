// jusText (Pomikálek's boilerplate removal, as the `justext` Python package 3.0 implements it)
// over libxml2's HTML parser, the parser the Python package reaches through lxml, so the DOM
// (with its error recovery) is the same:
//
//   1. decoding: the given charset, else a <meta ... charset=X> in the bytes, else UTF-8 if the
//      bytes are valid UTF-8, else UTF-8 with U+FFFD for bad bytes (jusText's decode_html);
//   2. cleaning, as its lxml Cleaner options do: <head>, <script>, <style>, <applet>, <button>,
//      <input>, <select>, <textarea> dropped with their content; <form>, <iframe>, <embed>,
//      <layer>, <object>, <param> dropped keeping their content; comments dropped;
//   3. paragraphs: the text between the starts and ends of block tags (jusText's
//      PARAGRAPH_TAGS) and double <br>s, whitespace runs collapsed, with the characters inside
//      <a> counted;
//   4. context-free classes (bad, short, near-good, good) from length, stop-word density and
//      link density, then the context-sensitive pass and the headings rule.
//
// The defaults are jusText's: length_low 70, length_high 200, stopwords_low 0.30,
// stopwords_high 0.32, max_link_density 0.2, max_heading_distance 200.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace mtnlg::curate {

struct JustextOptions {
  int64_t length_low = 70, length_high = 200;
  double stopwords_low = 0.30, stopwords_high = 0.32, max_link_density = 0.2;
  int64_t max_heading_distance = 200;
  bool no_headings = false;
};

struct JustextParagraph {
  std::string text;        // whitespace collapsed, stripped
  std::string dom_path;    // e.g. "html.body.div.p"
  std::string cf_class;    // context-free: bad, short, neargood, good
  std::string class_type;  // final: good or bad
  bool heading = false;
  int64_t chars_in_links = 0;
};

// jusText's own English stop-word list (stoplists/English.txt, 503 lines, compiled in),
// lower-cased: the list jusText uses when asked for English.
const std::unordered_set<std::string>& english_stoplist();
// A stop-word list from a file, one word a line (jusText's stoplists/*.txt), lower-cased.
std::unordered_set<std::string> read_stoplist(const std::string& path);
// The same from the file's text.
std::unordered_set<std::string> parse_stoplist(std::string_view text);

// HTML bytes to UTF-8 (step 1); `charset` from the HTTP header, or "".
std::string decode_html(const std::string& bytes, const std::string& charset);

// Steps 2-4 on UTF-8 HTML.
std::vector<JustextParagraph> justext(const std::string& utf8_html,
                                      const std::unordered_set<std::string>& stoplist,
                                      const JustextOptions& o = {});

}  // namespace mtnlg::curate
