// filter_ngrams.py's pieces (data/curate/ngram_filter.h), on cases worked out by hand from the
// script; tests/curate/decontaminate_test.sh compares whole shards with a Python transcription.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "data/curate/ngram_filter.h"

using namespace mtnlg::curate;
using mtnlg::python_lower;
using mtnlg::python_lower_utf8;
using mtnlg::u32_to_utf8;
using mtnlg::utf8_to_u32;

namespace {

std::string words(int from, int n) {
  std::string s;
  for (int i = from; i < from + n; ++i) s += (s.empty() ? "w" : " w") + std::to_string(i);
  return s;
}

}  // namespace

TEST_CASE(
    "words are re's word-character runs of the lower-cased text - positions in the lowered text") {
  // 'İ' lower-cases to 'i' + U+0307 (a combining mark, not \w): one more code point.
  const std::string text = "H\xc3\xa9llo, w\xc3\xb6rld_1 \xc4\xb0x 2\xe2\x85\xab";
  std::string lowered;
  python_lower_utf8(text, &lowered);
  CHECK(lowered == u32_to_utf8(python_lower(utf8_to_u32(text))));
  const std::vector<TextWord> w = python_words(lowered);
  REQUIRE(w.size() == 5);
  CHECK(w[0].bytes == "h\xc3\xa9llo");
  CHECK(w[1].bytes == "w\xc3\xb6rld_1");
  CHECK(w[2].bytes == "i");
  CHECK(w[3].bytes == "x");
  CHECK(w[4].bytes == "2\xe2\x85\xbb");  // Ⅻ has a numeric value: \w; its lower case is ⅻ
  std::vector<int64_t> pos;
  std::vector<int32_t> len;
  for (const TextWord& x : w) {
    pos.push_back(x.position);
    len.push_back(x.length);
    CHECK(x.hash == word_hash(x.bytes));
  }
  CHECK(pos == std::vector<int64_t>{0, 7, 15, 17, 19});  // code points, not bytes
  CHECK(len == std::vector<int32_t>{5, 7, 1, 1, 2});
}

TEST_CASE("UTF-8 lower-casing equals the code-point one - final sigma - every BMP letter") {
  const auto same = [](const std::string& t) {
    std::string lowered;
    python_lower_utf8(t, &lowered);
    return lowered == u32_to_utf8(python_lower(utf8_to_u32(t)));
  };
  // Σ is final after a cased letter (case-ignorables skipped) with none after it.
  CHECK(same("\xce\x9f\xce\xa3 \xce\xa3\xce\x9f \xce\x9f\xce\xa3' x \xce\xa3"));
  const std::string sigma = "\xce\x9f\xce\xa3";
  std::string lowered;
  python_lower_utf8(sigma, &lowered);
  CHECK(lowered == "\xce\xbf\xcf\x82");  // ος
  std::u32string all;
  for (char32_t c = 0x80; c < 0x10000; ++c)
    if (c < 0xD800 || c > 0xDFFF) all.push_back(c);
  CHECK(same(u32_to_utf8(all)));
}

TEST_CASE("task n-grams: 13-word windows, a text of 8 to 12 words whole, shorter ones nothing") {
  TaskNgrams g({});
  g.add_task_text(words(0, 15));   // 3 windows
  g.add_task_text(words(100, 9));  // whole
  g.add_task_text(words(200, 7));  // nothing
  g.add_task_text(words(0, 13));   // the first window again: no new n-gram
  REQUIRE(g.size() == 4);
  CHECK(g.key(0) == words(0, 13));
  CHECK(g.key(3) == words(100, 9));
}

TEST_CASE("a hit cuts at sentence ends 200 characters away - short pieces dropped") {
  TaskNgrams g({});
  g.add_task_text(words(0, 13));
  // 50 sentences of 5 words ("aa bb cc dd ee." is 15 characters, 16 with the space).
  std::string before, after;
  for (int i = 0; i < 50; ++i) before += "aa bb cc dd ee. ";
  after = before;
  const std::string text = before + words(0, 13) + " " + after;
  // Pass 1: one hit in this document.
  CHECK(g.hits(text) == std::vector<int64_t>{0});
  g.count(g.hits(text));
  g.keep_below_threshold();  // 1 document < 10: removed in pass 2
  const std::vector<std::string> pieces = g.clean(text);
  REQUIRE(pieces.size() == 2);
  // Before: the hit starts at 800; from 600 back to a '.': the one at 590 (600 falls in the
  // sentence that starts at 592), so text[0:591].
  CHECK(pieces[0] == before.substr(0, 591));
  // After: from 800 + the key's length ("w0 w1 ... w12": 38) + 200 forward to the next '.', then
  // everything after it.
  const std::string key = words(0, 13);
  const size_t from = text.find('.', 800 + key.size() + 200);
  CHECK(pieces[1] == text.substr(from + 1));
  // A document of fewer than 13 words is never scanned, even if all of it is task text.
  TaskNgrams short_task({});
  short_task.add_task_text(words(0, 9));
  CHECK(short_task.clean(words(0, 9)) == std::vector<std::string>{words(0, 9)});
  CHECK(short_task.hits(words(0, 9)).empty());
}

TEST_CASE("a text left by a hit is lower-cased anew - a word the cut splits is its tail") {
  // "İ" lowers to two code points: the lowered positions run two ahead of the text's after
  // "İİ", and the script cuts the text (counting: after the key plus one) at those positions,
  // so the next text starts two characters into "wxyz": its first word is "yz", not "wxyz".
  TaskNgrams g({});
  const std::string a = words(0, 13), rest = words(100, 12);
  g.add_task_text(a);               // 0
  g.add_task_text("wxyz " + rest);  // 1: not hit (the next text has no "wxyz")
  g.add_task_text("yz " + rest);    // 2: hit
  CHECK(g.hits("\xc4\xb0\xc4\xb0 " + a + " wxyz " + rest) == std::vector<int64_t>{0, 2});
  // Without the drift the next text starts at "wxyz".
  CHECK(g.hits("ii " + a + " wxyz " + rest) == std::vector<int64_t>{0, 1});
  // A capital sigma after a cased letter and a full stop is final in the whole text, and in the
  // text a hit leaves it starts, with nothing before it: 'σ', not 'ς'.
  TaskNgrams s({});
  const std::string ends_in_letter = words(0, 12) + " end";
  s.add_task_text(ends_in_letter);      // 0
  s.add_task_text("\xce\xa3 " + rest);  // 1: "σ w100 ... w111", 13 words
  CHECK(s.hits(ends_in_letter + ".\xce\xa3 " + rest) == std::vector<int64_t>{0, 1});
  // Read whole (no hit before it) the same 'Σ' is 'ς': no hit.
  CHECK(s.hits("x.\xce\xa3 " + rest).empty());
}
